package fold

import (
	"fmt"
	"math"
	"math/bits"
	"math/cmplx"

	"encmatch/core/base/errs"
	"encmatch/core/base/parallel"
	"encmatch/core/iris/dftbatch"
	"encmatch/core/iris/scoreslots"

	"github.com/tuneinsight/lattigo/v6/circuits/ckks/bootstrapping"
	"github.com/tuneinsight/lattigo/v6/circuits/ckks/lintrans"
	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// Refresher bootstraps the sums of Group in the bootstrapping ring of
// package scoreslots (ring N2 = P N_db): P sums of one database block are
// lifted to the bootstrapping's first prime, packed into one ciphertext
// of ring N2 (Lattigo's PackAndSwitchN1ToN2, which interleaves their
// coefficients), bootstrapped (Lattigo's full bootstrap, a DFT factor at
// a time across the batch: package dftbatch) and unmixed.
//
// The unmixing: packing puts the coefficient j of input u at P j +
// rev(u) (rev: the bit reversal of log2 P bits), so slot k = m + j N_db/2
// of ring N2 (zeta_k its root) holds sum_u zeta_k^rev(u) s_u[m], s_u[m]
// slot m of input u (zeta_k^P is ring N_db's root of slot m; the P roots
// zeta_k of one m differ by the P-th roots of unity). One linear
// transformation of one level with P diagonals (rotations by multiples
// of N_db/2; diagonal d at slot k is zeta_(k+d)^(-rev(j(k))) / P) gives
// back s_j[m] in slot m + j N_db/2 (the diagonals carry a further
// factor: Width). TestUnmixFormula checks the formula in
// the clear.
type Refresher struct {
	p      *Params
	s      *scoreslots.Params
	evals  []*bootstrapping.Evaluator
	unmix  []lintrans.LinearTransformation // per fold polynomial
	level  int                             // the bootstrap's output level, where the unmixing runs
	bounds []float64                       // per fold polynomial: the sums travel as S / bound
	widths []float64                       // per fold polynomial: the outputs hold S / width
	packed int                             // P: sums per bootstrap
}

// sumBound is a power of two above the magnitude of every sum of k values
// of a polynomial bounded by top (k top, with room for the evaluation's
// error): the sums travel through the bootstrap as S / sumBound, inside
// its [-1, 1].
func sumBound(k int, top float64) float64 {
	return math.Exp2(math.Ceil(math.Log2(float64(k) * top * 1.01)))
}

// UnmixGaloisElements are the Galois elements of the unmixing's rotations
// in the bootstrapping ring of s: by multiples of N_db/2.
func UnmixGaloisElements(s *scoreslots.Params) []uint64 {
	bp := s.Bootstrap.BootstrappingParameters
	half := s.Residual.N() / 2
	var rots []int
	for d := 1; d < bp.N()/s.Residual.N(); d++ {
		rots = append(rots, d*half)
	}
	return bp.GaloisElements(rots)
}

// CheckRefresh checks that the sums were scaled for the bootstrapping of
// s and for sums of up to k columns (Literal.GroupSize and
// LogMessageRatio; Params.SumScale): then the bootstrap's ScaleDown
// multiplies them by an integer exactly.
func (p *Params) CheckRefresh(s *scoreslots.Params, k int) error {
	if have := s.Bootstrap.Mod1ParametersLiteral.LogMessageRatio; have != p.Lit.LogMessageRatio || k != p.Lit.GroupSize {
		return fmt.Errorf("%w: sums scaled for groups of %d at a bootstrap message ratio of 2^%d, refreshed for groups of %d at 2^%d",
			errs.ErrMismatch, p.Lit.GroupSize, p.Lit.LogMessageRatio, k, have)
	}
	return nil
}

// NewRefresher makes the refresher of sums of up to k columns each, with
// the bootstrapping evaluators of s's blocks (scoreslots.Params.
// NewEvaluators, with the keys of UnmixGaloisElements). Its outputs of
// fold polynomial poly hold the sums divided by widths[poly], the
// unmixing's diagonals carrying the factor: a classifier that reads sums in [lo, hi] asks for hi - lo, so
// that a split slot minus (lo + hi) / (hi - lo) spans [-1, 1].
func (p *Params) NewRefresher(s *scoreslots.Params, evals []*bootstrapping.Evaluator, k int, widths []float64) (*Refresher, error) {
	if s.CCMM != p.CCMM {
		return nil, fmt.Errorf("%w: the bootstrapping follows another CCMM parameter set", errs.ErrMismatch)
	}
	if len(evals) == 0 || k < 1 {
		return nil, fmt.Errorf("%w: %d evaluators, sums of %d columns", errs.ErrInvalid, len(evals), k)
	}
	if err := p.CheckRefresh(s, k); err != nil {
		return nil, err
	}
	var bounds []float64
	for _, top := range p.Lit.Tops() {
		bounds = append(bounds, sumBound(k, top))
	}
	if len(widths) != len(bounds) {
		return nil, fmt.Errorf("%w: %d widths for %d fold polynomials", errs.ErrInvalid, len(widths), len(bounds))
	}
	for i, w := range widths {
		if !(w > 0) || math.IsInf(w, 0) {
			return nil, fmt.Errorf("%w: sums of polynomial %d divided by %v", errs.ErrInvalid, i, w)
		}
	}
	bp := s.Bootstrap.BootstrappingParameters
	n1, n2 := s.Residual.N(), bp.N()
	packed := n2 / n1
	half := n1 / 2
	level := s.Bootstrap.ResidualParameters.MaxLevel() // a full bootstrap's output level
	slots := bp.MaxSlots()
	rev := func(u int) int {
		if packed == 1 {
			return 0
		}
		return int(bits.Reverse64(uint64(u)) >> (64 - bits.Len(uint(packed-1))))
	}
	enc := ckks.NewEncoder(bp)
	roots := slotRoots(bp.N(), slots)
	var unmix []lintrans.LinearTransformation
	for i := range bounds {
		// The bootstrap leaves S / bound; the unmixing's P terms and the
		// factor bound / width leave S / width.
		factor := bounds[i] / (float64(packed) * widths[i])
		diags := lintrans.Diagonals[complex128]{}
		for d := 0; d < packed; d++ {
			diag := make([]complex128, slots)
			for k := range diag {
				j := k / half
				diag[k] = cmplx.Pow(roots[(k+d*half)%slots], complex(-float64(rev(j)), 0)) * complex(factor, 0)
			}
			diags[d*half] = diag
		}
		lt := lintrans.NewTransformation(bp, lintrans.Parameters{
			DiagonalsIndexList: diags.DiagonalsIndexList(), LevelQ: level, LevelP: bp.MaxLevelP(),
			Scale: rlwe.NewScale(bp.Q()[level]), LogDimensions: bp.LogMaxDimensions(), LogBabyStepGiantStepRatio: -1,
		})
		if err := lintrans.Encode(enc, diags, lt); err != nil {
			return nil, err
		}
		unmix = append(unmix, lt)
	}
	return &Refresher{p: p, s: s, evals: evals, unmix: unmix, level: level, bounds: bounds, widths: widths, packed: packed}, nil
}

// slotRoots are the roots of unity of slots 0 .. slots-1 in ring degree
// n: zeta^(5^k), zeta = exp(2 pi i / 2n) (Lattigo's slot order).
func slotRoots(n, slots int) []complex128 {
	out := make([]complex128, slots)
	e := 1
	for k := range out {
		out[k] = cmplx.Exp(complex(0, math.Pi*float64(e)/float64(n)))
		e = e * 5 % (2 * n)
	}
	return out
}

// OutputLevel is the level of Refresh's outputs: one below a bootstrap's.
func (r *Refresher) OutputLevel() int { return r.level - 1 }

// Width is what Refresh's outputs of fold polynomial poly are divided by
// (NewRefresher's widths).
func (r *Refresher) Width(poly int) float64 { return r.widths[poly] }

// Sums are the inputs of one refresh: up to P sums of fold polynomial Poly
// (its index in Literal.Polynomials) of database block Block, outputs of
// Group on the columns of one fold group each, all at the same level and
// scale.
type Sums struct {
	Block, Poly int
	Sums        []*rlwe.Ciphertext
}

// RefreshAll bootstraps the sums of every element of in, one bootstrap
// each: slot m + j N_db/2 of output k holds in[k].Sums[j]'s slot m, (S_lo +
// i S_hi) / Width(poly), one level below a bootstrap's output; slots of
// missing inputs hold zero. The bootstraps run together a DFT factor at a
// time (package dftbatch): a single bootstrap's linear transformations run
// on one core, a batch's on every core. Its memory grows with len(in)
// (about 0.1 GB per bootstrap at the iris presets).
func (r *Refresher) RefreshAll(in []Sums) ([]*rlwe.Ciphertext, error) {
	for _, x := range in {
		if x.Block < 0 || x.Block >= len(r.evals) || len(x.Sums) == 0 || len(x.Sums) > r.packed || x.Poly < 0 || x.Poly >= len(r.bounds) {
			return nil, fmt.Errorf("%w: %d sums of polynomial %d of block %d (up to %d per bootstrap, %d blocks, %d polynomials)",
				errs.ErrInvalid, len(x.Sums), x.Poly, x.Block, r.packed, len(r.evals), len(r.bounds))
		}
	}
	packed := make([]*rlwe.Ciphertext, len(in))
	if err := parallel.For(len(in), func(k int) (err error) {
		packed[k], err = r.pack(in[k])
		return err
	}); err != nil {
		return nil, err
	}
	boot, err := dftbatch.Bootstrap(r.evals[0], packed)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	out := make([]*rlwe.Ciphertext, len(in))
	err = parallel.For(len(in), func(k int) (err error) {
		out[k], err = r.unmixOne(boot[k], in[k].Poly)
		return err
	})
	return out, err
}

// pack lifts the sums of x to the bootstrapping's q0 and packs them into
// one ciphertext of the bootstrapping ring (Lattigo's
// PackAndSwitchN1ToN2), each as S / bound: the bootstrap's range is
// [-1, 1].
func (r *Refresher) pack(x Sums) (*rlwe.Ciphertext, error) {
	bound := r.bounds[x.Poly]
	in := make([]rlwe.Ciphertext, len(x.Sums))
	for i, ct := range x.Sums {
		lifted, err := r.s.LiftCiphertext(ct, r.p.CKKS.RingQ())
		if err != nil {
			return nil, err
		}
		lifted.Scale = lifted.Scale.Mul(rlwe.NewScale(bound))
		in[i] = *lifted
	}
	packed, _, _, err := r.evals[x.Block].PackAndSwitchN1ToN2(in)
	if err != nil {
		return nil, fmt.Errorf("packing: %w", err)
	}
	if len(packed) != 1 {
		return nil, fmt.Errorf("%w: %d sums packed into %d ciphertexts", errs.ErrInvalid, len(x.Sums), len(packed))
	}
	return &packed[0], nil
}

// unmixOne puts the packed sums of a bootstrapped ciphertext back in their
// slots (the unmixing of fold polynomial poly, one level).
func (r *Refresher) unmixOne(ct *rlwe.Ciphertext, poly int) (*rlwe.Ciphertext, error) {
	eval := r.evals[0].Evaluator
	if ct.Level() < r.level {
		return nil, fmt.Errorf("%w: the bootstrap left level %d, the unmixing is encoded at %d", errs.ErrInvalid, ct.Level(), r.level)
	}
	eval.DropLevel(ct, ct.Level()-r.level)
	res, err := lintrans.NewEvaluator(eval).EvaluateNew(ct, r.unmix[poly])
	if err != nil {
		return nil, fmt.Errorf("unmixing: %w", err)
	}
	if err := eval.Rescale(res, res); err != nil {
		return nil, err
	}
	return res, nil
}
