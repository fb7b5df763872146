// Package fold evaluates the fold of papers/004's Algorithm 2 on the
// scores that the encrypted matrix product of a slot-encoded database
// (package slotdb) leaves in the CKKS slots of ring N_db, before any
// bootstrap (docs/IRIS.md, "Folding (Algorithm 2)").
//
// For one database block and the k result columns of a fold group (k
// rotations of one query eye), each column's slots hold the scores of
// codes m and m + N_db/2 as one complex value. Group splits the two
// (conjugation), normalises them to the fold polynomial's variable
// x = dot / |m_1 and m_2| - delta (a product by a public plaintext: two
// levels, so that the plaintext keeps its precision whatever the
// column's scale), evaluates f (Lattigo's polynomial evaluator, in the
// Chebyshev basis), adds the k values and joins the two halves again:
// slot m of the output holds S(code m) + i S(code m + N_db/2), each S the
// sum that Algorithm 2's classifiers read. GroupModel is its plaintext
// model. The design of f and of the classifiers is python's
// (encmatch/iris/folding.py); every operation on ciphertexts is
// Lattigo's.
package fold

import (
	"fmt"
	"math"
	"math/big"

	"encmatch/core/base/errs"
	"encmatch/core/base/parallel"
	"encmatch/core/iris/ccmm"
	"encmatch/core/iris/scoreslots"
	"encmatch/core/iris/slotdb"

	"github.com/tuneinsight/lattigo/v6/circuits/ckks/polynomial"
	he "github.com/tuneinsight/lattigo/v6/circuits/common/polynomial"
	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
	"github.com/tuneinsight/lattigo/v6/utils/bignum"
)

// Polynomial is a fold polynomial: a Chebyshev series on [Lo, Hi].
type Polynomial struct {
	Chebyshev []float64
	Lo, Hi    float64
}

// Eval evaluates p at x (Clenshaw's recurrence on the series).
func (p Polynomial) Eval(x float64) float64 {
	u := (2*x - p.Lo - p.Hi) / (p.Hi - p.Lo)
	var b1, b2 float64
	for k := len(p.Chebyshev) - 1; k >= 1; k-- {
		b1, b2 = 2*u*b1-b2+p.Chebyshev[k], b1
	}
	return u*b1 - b2 + p.Chebyshev[0]
}

// Depth is the number of levels Lattigo's polynomial evaluator spends on
// p: ceil(log2(degree + 1)).
func (p Polynomial) Depth() int { return ceilLog2(len(p.Chebyshev)) }

// ceilLog2 is ceil(log2 n) for n >= 1.
func ceilLog2(n int) int {
	d := 0
	for 1<<d < n {
		d++
	}
	return d
}

// NormLevels is the number of levels the normalisation takes.
const NormLevels = 2

// Literal describes a fold over a CCMM parameter set.
type Literal struct {
	// Poly is f; Top bounds |f| on its domain (the design's measured
	// bound); Delta is the score threshold 1 - 2t (x = score - Delta).
	Poly       Polynomial
	Top, Delta float64
	// Maybe is the optional second polynomial h, on f's domain, whose sums
	// decide "maybe" (python's design with maybe_degree), MaybeTop its
	// bound; without it f's sums decide both.
	Maybe    *Polynomial
	MaybeTop float64
	// LogP are the special primes of the keys, LogScale the scale the
	// normalisation and f run at (about the size of Q's top primes).
	LogP     []int
	LogScale int
	// GroupSize is the most columns a group adds (k) and LogMessageRatio
	// the log2 of q0 / |m| that the refresh's bootstrap is built for (its
	// Mod1 parameters): together they set each polynomial's sum scale
	// (Params.SumScale).
	GroupSize, LogMessageRatio int
}

// Params is a validated fold over CCMM parameters and a slot encoding.
type Params struct {
	CCMM  *ccmm.Params
	Slots *slotdb.Encoder
	CKKS  ckks.Parameters // ring N_db over Q and P
	Lit   Literal
	// SumLevel is the level Group's sums leave at: the fold's last, or the
	// highest below it whose modulus the refresh can lift
	// (scoreslots.MaxLiftBits).
	SumLevel  int
	sumScales []rlwe.Scale            // per polynomial (SumScale)
	polys     []polynomial.Polynomial // f (and h) in the Chebyshev basis on [-1, 1], as the evaluator takes them
	extrema   [][2]float64            // their smallest and largest values (Extrema)
}

// Polynomials are the fold polynomials: f, then h when the design has it.
// Group returns one sum per polynomial, in this order.
func (lit Literal) Polynomials() []Polynomial {
	if lit.Maybe == nil {
		return []Polynomial{lit.Poly}
	}
	return []Polynomial{lit.Poly, *lit.Maybe}
}

// Tops are the bounds on |f| (and |h|), in the order of Polynomials.
func (lit Literal) Tops() []float64 {
	if lit.Maybe == nil {
		return []float64{lit.Top}
	}
	return []float64{lit.Top, lit.MaybeTop}
}

// Depth is the levels the deepest fold polynomial takes.
func (lit Literal) Depth() int {
	d := 0
	for _, p := range lit.Polynomials() {
		d = max(d, p.Depth())
	}
	return d
}

// NewParams checks that Q holds the normalisation and f above what the
// sums need, and builds the CKKS parameters.
func NewParams(cp *ccmm.Params, enc *slotdb.Encoder, lit Literal) (*Params, error) {
	tops := lit.Tops()
	var extrema [][2]float64
	for i, poly := range lit.Polynomials() {
		e, err := measure(poly, tops[i])
		if err != nil {
			return nil, err
		}
		extrema = append(extrema, e)
	}
	if lit.Maybe != nil && (lit.Maybe.Lo != lit.Poly.Lo || lit.Maybe.Hi != lit.Poly.Hi) {
		return nil, fmt.Errorf("%w: h on [%v, %v], f on [%v, %v]: they share one variable", errs.ErrInvalid, lit.Maybe.Lo, lit.Maybe.Hi, lit.Poly.Lo, lit.Poly.Hi)
	}
	if lit.GroupSize < 1 || lit.LogMessageRatio < 1 {
		return nil, fmt.Errorf("%w: groups of %d columns, a bootstrap message ratio of 2^%d", errs.ErrInvalid, lit.GroupSize, lit.LogMessageRatio)
	}
	params, err := enc.CKKSParameters(cp, lit.LogP, lit.LogScale)
	if err != nil {
		return nil, err
	}
	levels := NormLevels + lit.Depth()
	if params.MaxLevel() < levels {
		return nil, fmt.Errorf("%w: Q has %d levels above its first prime, the fold takes %d (normalisation %d, polynomials %d)",
			errs.ErrInvalid, params.MaxLevel(), levels, NormLevels, lit.Depth())
	}
	sumLevel, bits := -1, 0.0
	for _, q := range params.Q() {
		if bits += math.Log2(float64(q)); bits > scoreslots.MaxLiftBits {
			break
		}
		sumLevel++
	}
	if sumLevel < 0 {
		return nil, fmt.Errorf("%w: Q's first prime has more than the %d bits the refresh lifts from", errs.ErrInvalid, scoreslots.MaxLiftBits)
	}
	sumLevel = min(sumLevel, params.MaxLevel()-levels)
	p := &Params{CCMM: cp, Slots: enc, CKKS: params, Lit: lit, SumLevel: sumLevel, extrema: extrema}
	for i, poly := range lit.Polynomials() {
		p.polys = append(p.polys, polynomial.NewPolynomial(bignum.NewPolynomial(bignum.Chebyshev, poly.Chebyshev, [2]float64{-1, 1})))
		scale, err := p.sumScale(tops[i])
		if err != nil {
			return nil, err
		}
		p.sumScales = append(p.sumScales, scale)
	}
	return p, nil
}

// sumScale is the scale of the sums of a polynomial bounded by top:
// Q_s / (bound 2^LogMessageRatio R), Q_s the moduli under SumLevel, bound
// = sumBound(GroupSize, top) (the refresh divides the sums by it), and R
// the smallest power of two that keeps the scale at most the working
// scale 2^LogScale. The refresh lifts the sums to the bootstrap's q0
// (scale times q0 / Q_s) and labels them S / bound, so the bootstrap's
// ScaleDown finds q0 / scale = 2^LogMessageRatio R: it multiplies by the
// integer R exactly. (At a power-of-two sum scale it multiplied by the
// nearest integer to a ratio like 1.23, and every sum of f came back as
// noise at ring 2^14, although the sums were inside the message ratio:
// docs/IRIS.md, "The sums' scale".)
func (p *Params) sumScale(top float64) (rlwe.Scale, error) {
	qs := new(big.Float).SetPrec(256).SetInt64(1)
	for _, q := range p.CKKS.Q()[:p.SumLevel+1] {
		qs.Mul(qs, new(big.Float).SetUint64(q))
	}
	den := new(big.Float).SetPrec(256).SetFloat64(math.Ldexp(sumBound(p.Lit.GroupSize, top), p.Lit.LogMessageRatio))
	scale := new(big.Float).SetPrec(256).Quo(qs, den)
	working := new(big.Float).SetPrec(256).SetMantExp(big.NewFloat(1), p.Lit.LogScale)
	for scale.Cmp(working) > 0 {
		scale.Quo(scale, big.NewFloat(2))
	}
	if s, _ := scale.Float64(); s < 1 {
		return rlwe.Scale{}, fmt.Errorf("%w: sums of %d values up to %v at scale %.3g: Q's first primes (2^%.1f) leave the refresh no room at a message ratio of 2^%d",
			errs.ErrInvalid, p.Lit.GroupSize, top, s, rlwe.NewScale(qs).Log2(), p.Lit.LogMessageRatio)
	}
	return rlwe.NewScale(scale), nil
}

// SumScale is the scale Group's sums of fold polynomial poly leave at
// (its index in Literal.Polynomials).
func (p *Params) SumScale(poly int) rlwe.Scale { return p.sumScales[poly] }

// measure checks a fold polynomial's domain and returns its smallest and
// largest value on a grid of 2^16 + 1 points, checked against the
// design's bound top on |p|.
func measure(p Polynomial, top float64) ([2]float64, error) {
	if len(p.Chebyshev) < 2 || !(p.Hi > p.Lo) {
		return [2]float64{}, fmt.Errorf("%w: fold polynomial of %d coefficients on [%v, %v]", errs.ErrInvalid, len(p.Chebyshev), p.Lo, p.Hi)
	}
	if !(top > 0) {
		return [2]float64{}, fmt.Errorf("%w: a bound of %v on a fold polynomial", errs.ErrInvalid, top)
	}
	e := [2]float64{math.Inf(1), math.Inf(-1)}
	for i := 0; i <= 1<<16; i++ {
		y := p.Eval(p.Lo + (p.Hi-p.Lo)*float64(i)/(1<<16))
		e = [2]float64{math.Min(e[0], y), math.Max(e[1], y)}
	}
	if m := math.Max(-e[0], e[1]); !(m <= top*(1+1e-9)) {
		return [2]float64{}, fmt.Errorf("%w: |p| reaches %v on its domain, over the bound %v", errs.ErrInvalid, m, top)
	}
	return e, nil
}

// Extrema are the smallest and largest values of fold polynomial poly
// (its index in Literal.Polynomials) on its domain, measured on a grid by
// NewParams.
func (p *Params) Extrema(poly int) (lo, hi float64) { return p.extrema[poly][0], p.extrema[poly][1] }

// Security lists the keys this package adds: the relinearisation and
// conjugation keys of a database secret, ring N_db at modulus Q P (the
// database itself, at Q K, is ccmm.Params.Security's).
func (p *Params) Security() []ccmm.SecurityCheck {
	return []ccmm.SecurityCheck{ccmm.CheckRLWE("fold keys (database secret, Q P)", p.CKKS.Parameters)}
}

// GenKeys returns the evaluation keys of one database block: the
// relinearisation key and the conjugation key under the block's secret
// (as a secret of the CKKS parameters, ccmm.Params.SecretAs). They are made by
// the key holder, with Lattigo's key generator.
func (p *Params) GenKeys(dbSecret *rlwe.SecretKey) (*rlwe.MemEvaluationKeySet, error) {
	sk, err := p.CCMM.SecretAs(dbSecret, p.CKKS)
	if err != nil {
		return nil, err
	}
	kg := rlwe.NewKeyGenerator(p.CKKS)
	return rlwe.NewMemEvaluationKeySet(kg.GenRelinearizationKeyNew(sk),
		kg.GenGaloisKeyNew(p.CKKS.GaloisElementForComplexConjugation(), sk)), nil
}

// affine returns the map u = a x + b of [Lo, Hi] onto [-1, 1].
func (p *Params) affine() (a, b float64) {
	lo, hi := p.Lit.Poly.Lo, p.Lit.Poly.Hi
	return 2 / (hi - lo), -(hi + lo) / (hi - lo)
}

// x is the fold's variable for a dot product and an overlap: dot / overlap
// - Delta, and -Delta where the masks have no common bit.
func (p *Params) x(dot int64, overlap int) float64 {
	if overlap <= 0 {
		return -p.Lit.Delta
	}
	return float64(dot)/float64(overlap) - p.Lit.Delta
}

// GroupModel is Group's plaintext model: for each fold polynomial
// (Literal.Polynomials), the sums S of block t (index: code within the
// block) over the columns cols of the exact products dots (rows:
// database codes, columns: query columns), with the public overlaps.
func (p *Params) GroupModel(dots ccmm.IntMat, t int, cols []int, overlap func(row, col int) int) [][]float64 {
	n := p.CKKS.N()
	polys := p.Lit.Polynomials()
	out := make([][]float64, len(polys))
	for i, poly := range polys {
		out[i] = make([]float64, n)
		for k := range out[i] {
			for _, j := range cols {
				out[i][k] += poly.Eval(p.x(dots.At(t*n+k, j), overlap(t*n+k, j)))
			}
		}
	}
	return out
}

// Evaluator runs Group with one block's keys.
type Evaluator struct {
	p    *Params
	keys rlwe.EvaluationKeySet
	eval *ckks.Evaluator // Group's own (the columns make theirs)
}

// NewEvaluator makes the evaluator of a block with its keys (GenKeys).
func (p *Params) NewEvaluator(keys rlwe.EvaluationKeySet) *Evaluator {
	return &Evaluator{p: p, keys: keys, eval: ckks.NewEvaluator(p.CKKS, keys)}
}

// Group folds the columns cols of block t of a rescaled CCMM result of a
// slot-encoded database (its rows: database codes; overlap(row, col):
// the public |m_1 and m_2| of each pair): for each fold polynomial
// (Literal.Polynomials) it returns a ciphertext whose slot m holds
// S(code m) + i S(code m + N_db/2) at scale SumScale(poly), S(code) = sum
// over cols of the polynomial at x, all at level SumLevel. The columns run in parallel.
func (ev *Evaluator) Group(res *ccmm.SharedA, t int, cols []int, overlap func(row, col int) int) ([]*rlwe.Ciphertext, error) {
	if len(cols) == 0 {
		return nil, fmt.Errorf("%w: a fold group without columns", errs.ErrInvalid)
	}
	values := make([][][2]*rlwe.Ciphertext, len(cols)) // column, polynomial, half
	err := parallel.For(len(cols), func(i int) (err error) {
		values[i], err = ev.column(res, t, cols[i], overlap)
		return err
	})
	if err != nil {
		return nil, err
	}
	eval := ev.eval
	out := make([]*rlwe.Ciphertext, len(ev.p.polys))
	for i := range out {
		sum := values[0][i]
		for _, v := range values[1:] {
			for u := range sum {
				if err := eval.Add(sum[u], v[i][u], sum[u]); err != nil {
					return nil, err
				}
			}
		}
		// z = S_lo + i S_hi: a product by i is a monomial, no level.
		if err := eval.Mul(sum[1], 1i, sum[1]); err != nil {
			return nil, err
		}
		if err := eval.Add(sum[0], sum[1], sum[0]); err != nil {
			return nil, err
		}
		out[i] = sum[0]
	}
	// Every sum leaves at SumLevel (the lift before the bootstrap takes
	// the primes under it).
	for _, ct := range out {
		eval.DropLevel(ct, ct.Level()-ev.p.SumLevel)
	}
	return out, nil
}

// Split returns the real halves of z's slots, 2 Re z = z + conj z and
// 2 Im z = -i (z - conj z): one conjugation (eval needs its key), no
// level.
func Split(eval *ckks.Evaluator, z *rlwe.Ciphertext) (re, im *rlwe.Ciphertext, err error) {
	conj, err := eval.ConjugateNew(z)
	if err != nil {
		return nil, nil, err
	}
	if re, err = eval.AddNew(z, conj); err != nil {
		return nil, nil, err
	}
	if im, err = eval.SubNew(z, conj); err != nil {
		return nil, nil, err
	}
	if err := eval.Mul(im, -1i, im); err != nil {
		return nil, nil, err
	}
	return re, im, nil
}

// column returns each fold polynomial at x of one column's two halves
// (codes m and m + N/2 in slot m), at its SumScale; the
// polynomials share one power basis of x.
func (ev *Evaluator) column(res *ccmm.SharedA, t, j int, overlap func(row, col int) int) ([][2]*rlwe.Ciphertext, error) {
	p := ev.p
	eval := ckks.NewEvaluator(p.CKKS, ev.keys) // buffers of its own: columns run in parallel
	out := make([][2]*rlwe.Ciphertext, len(p.polys))
	z, err := p.Slots.Column(p.CKKS, p.CCMM, res, t, j)
	if err != nil {
		return nil, err
	}
	re, im, err := Split(eval, z)
	if err != nil {
		return nil, err
	}
	// u = a x + b = (a / (2 overlap)) (2 dot) + b - a Delta; the
	// plaintext's scale makes the two rescales land on the working scale
	// exactly.
	a, b := p.affine()
	n, half := p.CKKS.N(), p.CKKS.N()/2
	level := z.Level()
	q := p.CKKS.Q()
	working := p.CKKS.DefaultScale()
	ptScale := new(big.Float).Mul(&working.Value, new(big.Float).SetUint64(q[level]))
	ptScale.Mul(ptScale, new(big.Float).SetUint64(q[level-1]))
	ptScale.Quo(ptScale, &z.Scale.Value)
	enc := ckks.NewEncoder(p.CKKS)
	pe := polynomial.NewEvaluator(p.CKKS, eval)
	for u, h := range []*rlwe.Ciphertext{re, im} {
		w := make([]float64, half)
		for m := range w {
			row := t*n + m + u*half
			if ov := overlap(row, j); ov > 0 {
				w[m] = a / (2 * float64(ov))
			}
		}
		pt := ckks.NewPlaintext(p.CKKS, level)
		pt.Scale = rlwe.NewScale(ptScale)
		if err := enc.Encode(w, pt); err != nil {
			return nil, err
		}
		if err := eval.Mul(h, pt, h); err != nil {
			return nil, err
		}
		for range NormLevels {
			if err := eval.Rescale(h, h); err != nil {
				return nil, err
			}
		}
		if err := eval.Add(h, b-a*p.Lit.Delta, h); err != nil {
			return nil, err
		}
		basis := he.NewPowerBasis(h, bignum.Chebyshev)
		for i, poly := range p.polys {
			if out[i][u], err = pe.EvaluateFromPowerBasis(basis, poly, p.sumScales[i]); err != nil {
				return nil, fmt.Errorf("fold polynomial %d: %w", i, err)
			}
		}
	}
	return out, nil
}
