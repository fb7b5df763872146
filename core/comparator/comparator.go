// Package comparator implements the encrypted threshold test
// f(s) = (sign(s - delta) + 1) / 2 used on similarity scores, and its
// plaintext model.
//
// The comparator is the hybrid of HyDia (papers/000, section 3): a Chebyshev
// series of a smooth sign, followed by one sharpening polynomial of Cheon et
// al. (f3(y) = (35y - 35y^3 + 21y^5 - 5y^7)/16, whose derivatives vanish at
// +-1 so that values near +-1 are pulled flat). Both stages are polynomials
// in the Chebyshev basis on [-1, 1], evaluated by Lattigo's Paterson-Stockmeyer
// (baby-step giant-step) evaluator; the plaintext model evaluates the very
// same coefficients with Clenshaw's recurrence, in the same basis. Nothing is
// ever converted to the monomial basis, the bug class that papers/003 reports
// halving recall.
//
// With a depth budget kappa, stage one has degree 2^(kappa-3) - 1 (depth
// kappa - 3) and the sharpening stage depth 3. The affine map (y + 1)/2 is
// folded into the sharpening coefficients, so the output lies in [0, 1] and no
// level is spent on it.
//
// Inputs are scores multiplied by a known ScoreScale a < 1 (the enroller
// scales the gallery), so that every possible cosine score, plus CKKS noise,
// lies inside the approximation interval [-1, 1] without spending a level on
// a change of variable.
package comparator

import (
	"errors"
	"fmt"
	"math"
	"math/big"

	"github.com/tuneinsight/lattigo/v6/circuits/ckks/polynomial"
	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/utils/bignum"
)

// SharpenDepth is the depth of the sharpening stage (f3, degree 7).
const SharpenDepth = 3

// ValueTolerance is the per-entry error that the value band guarantees:
// outside it, 2^20 entries (64 groups) summed stay within 1 of the count.
const ValueTolerance = 1.0 / (1 << 21)

// DefaultScoreScale maps cosine scores in [-1, 1] to [-1/(1+2^-7), 1/(1+2^-7)].
const DefaultScoreScale = 1.0 / (1.0 + 1.0/128)

// steepnessPerDegree sets the smooth sign tanh(k (s - delta)) of stage one:
// k = steepnessPerDegree * (degree + 1). Chosen by minimising, over kappa in
// {8, 10} and delta in [0.2, 0.8], the band outside which the error stays
// below ValueTolerance (docs/COMPARATOR.md).
const steepnessPerDegree = 0.375

// Comparator is one (kappa, delta) threshold test: its two polynomial stages,
// their plaintext model and the guard bands measured on that model.
type Comparator struct {
	Kappa      int
	Delta      float64
	ScoreScale float64
	Degree     int     // degree of stage one
	Steepness  float64 // k of tanh(k (s - delta))

	// DecisionBand: for every score s with |s - delta| > DecisionBand the
	// model's decision (output >= 1/2) equals the exact s >= delta.
	DecisionBand float64
	// ValueBand: for every score s with |s - delta| > ValueBand the model's
	// output is within ValueTolerance of the exact 0/1.
	ValueBand float64

	stage1, sharpen       bignum.Polynomial
	stage1F64, sharpenF64 []float64
}

// Check validates a comparator specification without building it (New
// also interpolates the polynomials and scans them for the guard bands).
func Check(kappa int, delta, scoreScale float64) error {
	if kappa < SharpenDepth+2 {
		return fmt.Errorf("comparator depth kappa=%d too small (minimum %d)", kappa, SharpenDepth+2)
	}
	if math.IsNaN(delta) || delta <= -1 || delta >= 1 {
		return fmt.Errorf("threshold delta=%v must lie in (-1, 1)", delta)
	}
	if !(scoreScale > 0 && scoreScale <= 1) {
		return fmt.Errorf("score scale %v must lie in (0, 1]", scoreScale)
	}
	return nil
}

// New builds the comparator for depth budget kappa, threshold delta and
// score scale a (0 < a <= 1).
func New(kappa int, delta, scoreScale float64) (*Comparator, error) {
	if err := Check(kappa, delta, scoreScale); err != nil {
		return nil, err
	}
	deg := 1<<(kappa-SharpenDepth) - 1
	k := steepnessPerDegree * float64(deg+1)
	c := &Comparator{Kappa: kappa, Delta: delta, ScoreScale: scoreScale, Degree: deg, Steepness: k}

	smoothSign := func(t float64) float64 { return math.Tanh(k * (t/scoreScale - delta)) }
	c.stage1 = chebyshev(smoothSign, deg)
	f3half := func(y float64) float64 {
		y2 := y * y
		return 0.5 + (35*y-35*y*y2+21*y*y2*y2-5*y*y2*y2*y2)/32
	}
	c.sharpen = chebyshev(f3half, 7)
	c.stage1F64 = toFloat64(c.stage1)
	c.sharpenF64 = toFloat64(c.sharpen)
	c.DecisionBand, c.ValueBand = c.measureBands()
	return c, nil
}

// chebyshev interpolates f at deg+1 Chebyshev nodes of [-1, 1] (Lattigo's
// bignum.ChebyshevApproximation) and returns the series in the Chebyshev basis.
func chebyshev(f func(float64) float64, deg int) bignum.Polynomial {
	const prec = 128
	iv := bignum.Interval{A: *bignum.NewFloat(-1, prec), B: *bignum.NewFloat(1, prec), Nodes: deg}
	return bignum.ChebyshevApproximation(func(x *big.Float) *big.Float {
		xf, _ := x.Float64()
		return new(big.Float).SetPrec(prec).SetFloat64(f(xf))
	}, iv)
}

func toFloat64(p bignum.Polynomial) []float64 {
	out := make([]float64, len(p.Coeffs))
	for i, c := range p.Coeffs {
		out[i], _ = c[0].Float64()
	}
	return out
}

// clenshaw evaluates sum_i c_i T_i(x).
func clenshaw(c []float64, x float64) float64 {
	var b1, b2 float64
	for i := len(c) - 1; i >= 1; i-- {
		b1, b2 = 2*x*b1-b2+c[i], b1
	}
	return x*b1 - b2 + c[0]
}

// Stage1 is the plaintext model of stage one at a scaled score t = a*s.
func (c *Comparator) Stage1(t float64) float64 { return clenshaw(c.stage1F64, t) }

// Model is the plaintext model of the whole comparator at a cosine score s:
// exactly the polynomials the encrypted path evaluates.
func (c *Comparator) Model(s float64) float64 {
	return clenshaw(c.sharpenF64, c.Stage1(c.ScoreScale*s))
}

// Depth is the number of levels the comparator consumes.
func (c *Comparator) Depth() int { return c.Kappa }

// measureBands scans the model over [-1, 1] (step 2^-13) and, finely
// (step 2^-20), over delta +- 1/4.
func (c *Comparator) measureBands() (decision, value float64) {
	check := func(s float64) {
		f := c.Model(s)
		exact := 0.0
		if s >= c.Delta {
			exact = 1
		}
		d := math.Abs(s - c.Delta)
		if (f >= 0.5) != (exact == 1) && d > decision {
			decision = d
		}
		if math.Abs(f-exact) > ValueTolerance && d > value {
			value = d
		}
	}
	for s := -1.0; s <= 1.0; s += 1.0 / (1 << 13) {
		check(s)
	}
	for s := c.Delta - 0.25; s <= c.Delta+0.25; s += 1.0 / (1 << 20) {
		if s >= -1 && s <= 1 {
			check(s)
		}
	}
	const resolution = 1.0 / (1 << 20)
	return math.Max(decision, resolution), math.Max(value, resolution)
}

// ErrLevels is returned when a ciphertext has too few levels left.
var ErrLevels = errors.New("comparator: not enough levels left")

// Evaluate applies the comparator to a ciphertext of scaled scores, with
// Lattigo's polynomial evaluator, stage by stage, in the Chebyshev basis. The
// output has kappa fewer levels and the given scale.
func (c *Comparator) Evaluate(pe *polynomial.Evaluator, ct *rlwe.Ciphertext, scale rlwe.Scale) (*rlwe.Ciphertext, error) {
	if ct.Level() < c.Kappa {
		return nil, fmt.Errorf("%w: have %d, need %d", ErrLevels, ct.Level(), c.Kappa)
	}
	y, err := pe.Evaluate(ct, polynomial.NewPolynomial(c.stage1), scale)
	if err != nil {
		return nil, fmt.Errorf("comparator stage 1: %w", err)
	}
	z, err := pe.Evaluate(y, polynomial.NewPolynomial(c.sharpen), scale)
	if err != nil {
		return nil, fmt.Errorf("comparator sharpening: %w", err)
	}
	return z, nil
}
