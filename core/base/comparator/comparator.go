// Package comparator implements the encrypted threshold test
// f(s) = (sign(s - delta) + 1) / 2 used on similarity scores, and its
// plaintext model.
//
// The comparator is a composite of minimax polynomials that approximate
// sign (Lee et al., "Minimax approximation of sign function by composite
// polynomial"; the construction of Lattigo's circuits/ckks/minimax): each
// stage is the minimax approximation, by Lattigo's multi-interval Remez
// algorithm, of sign on the image of the previous stage. The chains are
// generated offline for each depth budget kappa (composites_gen.go, by
// ./internal/gencomposite) together with their gap: for |u| >= gap the chain
// is within 2^-22 of sign(u). The threshold enters through stage 0, which
// reads u = (a*s - a*delta) / (1 + a|delta|), a map folded into its
// coefficients, so that the value band is gap * (1 + a|delta|) / a around
// delta and the decision boundary is delta itself (stage 0 vanishes at
// u = 0 and every later stage is odd).
//
// Every stage is a series in the Chebyshev basis on [-1, 1] evaluated by
// Lattigo's Paterson-Stockmeyer (baby-step giant-step) evaluator; the
// plaintext model evaluates the very same coefficients with Clenshaw's
// recurrence, in the same basis. Nothing is ever converted to the monomial
// basis, the bug class that papers/003 reports halving recall. The last
// stage folds in the affine map (y + 1) / 2, so the output lies in [0, 1].
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
	"sync"

	"github.com/tuneinsight/lattigo/v6/circuits/ckks/polynomial"
	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/utils/bignum"
)

// ValueTolerance is the per-entry error that the value band guarantees:
// outside it, 2^20 entries (64 groups) summed stay within 1/2 of the count.
const ValueTolerance = 1.0 / (1 << 21)

// DefaultScoreScale maps cosine scores in [-1, 1] to [-1/(1+2^-7), 1/(1+2^-7)].
const DefaultScoreScale = 1.0 / (1.0 + 1.0/128)

// signTolerance is the error each composite is designed for, in units of
// sign (the output (y + 1) / 2 halves it): a factor 4 below ValueTolerance
// leaves room for the CKKS noise of the evaluation.
const signTolerance = ValueTolerance / 2

// composite is one depth budget's chain of minimax sign polynomials,
// generated offline (composites_gen.go, by ./internal/gencomposite).
type composite struct {
	// gap: the chain is within signError of sign(u) for gap <= |u| <= 1.
	gap       float64
	signError float64
	// stages: Chebyshev coefficients of each stage, read on [-1, 1]; every
	// stage after the first is odd.
	stages [][]string
}

// Comparator is one (kappa, delta) threshold test: its polynomial stages,
// their plaintext model and the guard bands measured on that model.
type Comparator struct {
	Kappa      int
	Delta      float64
	ScoreScale float64
	// Degrees are the degrees of the stages, stage 0 first.
	Degrees []int
	// Gap is the design value band: the half-width around delta, in cosine
	// units, outside which the composite is within SignError of the sign.
	Gap float64
	// SignError is the composite's largest error, in sign units, outside
	// delta +- Gap (as Remez reported it when the stages were generated).
	SignError float64

	// DecisionBand: for every score s with |s - delta| > DecisionBand the
	// model's decision (output >= 1/2) equals the exact s >= delta.
	DecisionBand float64
	// ValueBand: for every score s with |s - delta| > ValueBand the model's
	// output is within ValueTolerance of the exact 0/1.
	ValueBand float64

	stages    []bignum.Polynomial
	stagesF64 [][]float64
}

// Check validates a comparator specification without building it (New
// also scans the model for the guard bands).
func Check(kappa int, delta, scoreScale float64) error {
	if _, ok := composites[kappa]; !ok {
		lo, hi := KappaRange()
		return fmt.Errorf("comparator depth kappa=%d is not supported (want %d to %d)", kappa, lo, hi)
	}
	if math.IsNaN(delta) || delta <= -1 || delta >= 1 {
		return fmt.Errorf("threshold delta=%v must lie in (-1, 1)", delta)
	}
	if !(scoreScale > 0 && scoreScale <= 1) {
		return fmt.Errorf("score scale %v must lie in (0, 1]", scoreScale)
	}
	return nil
}

// KappaRange is the smallest and largest depth budget with a composite.
func KappaRange() (lo, hi int) {
	lo, hi = math.MaxInt, 0
	for k := range composites {
		lo, hi = min(lo, k), max(hi, k)
	}
	return
}

type cacheKey struct {
	kappa             int
	delta, scoreScale float64
}

var (
	cacheMu sync.Mutex
	cache   = map[cacheKey]*Comparator{}
)

// New returns the comparator for depth budget kappa, threshold delta and
// score scale a (0 < a <= 1). Comparators are cached for the life of the
// process (measuring the bands scans 2^20 points); the returned value is
// shared and must not be modified.
func New(kappa int, delta, scoreScale float64) (*Comparator, error) {
	if err := Check(kappa, delta, scoreScale); err != nil {
		return nil, err
	}
	key := cacheKey{kappa, delta, scoreScale}
	cacheMu.Lock()
	defer cacheMu.Unlock()
	if c, ok := cache[key]; ok {
		return c, nil
	}
	c := build(kappa, delta, scoreScale)
	cache[key] = c
	return c, nil
}

// build composes the kappa chain with the threshold: stage 0 reads
// u = (t - c) / (1 + |c|) instead of t, where t = a*s is the scaled score
// and c = a*delta, so that u is in [-1, 1] for every t in [-1, 1] and
// vanishes exactly at the threshold. The composition with this affine map
// is again a polynomial of the same degree, re-expanded in the Chebyshev
// basis of t by interpolation at its Chebyshev nodes (exact up to rounding),
// so no level is spent on it. The last stage folds in (y + 1) / 2.
func build(kappa int, delta, scoreScale float64) *Comparator {
	comp := composites[kappa]
	center := scoreScale * delta
	stretch := 1 + math.Abs(center)
	c := &Comparator{Kappa: kappa, Delta: delta, ScoreScale: scoreScale, SignError: comp.signError,
		Gap: comp.gap * stretch / scoreScale}

	for i, coeffs := range comp.stages {
		p := bignum.NewPolynomial(bignum.Chebyshev, parseCoeffs(coeffs), [2]float64{-1, 1})
		if i == 0 {
			q := p
			p = bignum.ChebyshevApproximation(func(t *big.Float) *big.Float {
				u := new(big.Float).SetPrec(precision).Sub(t, big.NewFloat(center))
				u.Quo(u, big.NewFloat(stretch))
				return q.Evaluate(u)[0]
			}, bignum.Interval{A: *bignum.NewFloat(-1, precision), B: *bignum.NewFloat(1, precision), Nodes: len(coeffs) - 1})
		}
		if i == len(comp.stages)-1 {
			for _, x := range p.Coeffs {
				x[0].Quo(x[0], big.NewFloat(2))
			}
			p.Coeffs[0][0].Add(p.Coeffs[0][0], big.NewFloat(0.5))
		}
		c.Degrees = append(c.Degrees, len(coeffs)-1)
		c.stages = append(c.stages, p)
		c.stagesF64 = append(c.stagesF64, toFloat64(p))
	}
	c.DecisionBand, c.ValueBand = c.measureBands()
	return c
}

// precision of the big.Float coefficients.
const precision = 128

func parseCoeffs(s []string) []*big.Float {
	out := make([]*big.Float, len(s))
	for i, x := range s {
		out[i], _ = new(big.Float).SetPrec(precision).SetString(x)
	}
	return out
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

// Model is the plaintext model of the whole comparator at a cosine score s:
// exactly the polynomials the encrypted path evaluates.
func (c *Comparator) Model(s float64) float64 {
	y := c.ScoreScale * s
	for _, st := range c.stagesF64 {
		y = clenshaw(st, y)
	}
	return y
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
// Lattigo's polynomial evaluator, stage by stage, in the Chebyshev basis,
// each stage at the default scale but the last, whose output has the given
// scale, kappa levels below the input.
func (c *Comparator) Evaluate(pe *polynomial.Evaluator, ct *rlwe.Ciphertext, scale rlwe.Scale) (*rlwe.Ciphertext, error) {
	if ct.Level() < c.Kappa {
		return nil, fmt.Errorf("%w: have %d, need %d", ErrLevels, ct.Level(), c.Kappa)
	}
	y := ct
	for i, st := range c.stages {
		// Every stage but the last is evaluated at the default scale: the
		// output's scale (a payload search asks for a smaller one) is the
		// last stage's target only.
		target := pe.Parameters.DefaultScale()
		if i == len(c.stages)-1 {
			target = scale
		}
		var err error
		if y, err = pe.Evaluate(y, polynomial.NewPolynomial(st), target); err != nil {
			return nil, fmt.Errorf("comparator stage %d: %w", i, err)
		}
	}
	return y, nil
}
