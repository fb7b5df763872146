// Package discretise turns every value of an encrypted iris result into 0
// or 1, also a value strictly between them (an eye whose best score lies
// inside the comparator's band): papers/004 §3.3.1 (docs/IRIS.md,
// "Discretisation"). The values are taken from the slots to the
// coefficients, the ciphertext is switched to the bootstrapping's
// ephemeral sparse secret at its first prime q0 and its modulus rounded to
// V = 2^(Bits + LogMessageRatio) and lifted back to q0, so that its phase
// becomes (q0 / V) i for an integer i = 2^Bits v + r, |r| <= Bound; a
// half-bootstrap (ModUp, CoeffsToSlots, EvalMod) puts i / 2^Bits in the
// slots, within the bootstrap's error of a multiple of 2^-Bits, and a
// comparator whose band fits in the gap between those multiples splits
// them at 1/2. A value of exactly 0 or 1 keeps its bit (Bound < 2^(Bits-1));
// any other value gets 0 or 1, whichever its rounding gives. Everything
// but the rounding is Lattigo's (the key switches, ModUp, CoeffsToSlots,
// EvalMod, the decoding transform) or this project's comparator.
package discretise

import (
	"fmt"
	"math"
	"math/bits"

	"encmatch/core/base/comparator"
	"encmatch/core/base/errs"
	"encmatch/core/iris/dftbatch"

	"github.com/tuneinsight/lattigo/v6/circuits/ckks/bootstrapping"
	"github.com/tuneinsight/lattigo/v6/circuits/ckks/dft"
	"github.com/tuneinsight/lattigo/v6/circuits/ckks/polynomial"
	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// MinBits is the smallest Discretiser.Bits: 6 for one holder's
// weight-32 ephemeral secret (Bound 17), 7 for the sum of three parties'
// shares (l1 up to 96, Bound 49; scoreslots.IrisThreshold).
const MinBits = 6

// BootstrapError is the error, in units (multiples of 2^-Bits), that the
// comparator's band leaves room for around each integer: the
// half-bootstrap's, measured at 8e-3 units at the toy rings
// (TestDiscretise, which fails above BootstrapError).
const BootstrapError = 1.0 / 16

// Discretiser discretises the results of one bootstrapping evaluator.
type Discretiser struct {
	btp *bootstrapping.Evaluator
	// Bound bounds |r|, what the rounding adds to 2^Bits v: (1 + h) / 2 for
	// the ephemeral secret's l1 norm h (its Hamming weight, or the sum of
	// the parties' shares' weights: Lattigo's EphemeralSecretWeight either
	// way), plus 1/2 for the evaluation's error before the rounding and
	// the key switches' noise (both measured far below it:
	// TestDiscretise).
	Bound float64
	// Bits is log2 of the integers' unit: a value v becomes the integer
	// 2^Bits v + r. The smallest from MinBits with Bound below
	// 2^(Bits-1) - 1, so that 0 and 1 keep their bits.
	Bits int
	// Comparator splits i / 2^Bits at 1/2, on i / 2^Bits mapped onto
	// [-1, 1] by t = (x - center) / width.
	Comparator    *comparator.Comparator
	center, width float64
	decode        dft.Matrix // the bootstrapping's SlotsToCoeffs, unscaled, at its own levels from level decode.LevelQ
	logV          int
}

// Supported says whether btp's bootstrapping can discretise: it needs the
// sparse-secret encapsulation (presets without it, such as default-dense,
// leave their results as the comparator gave them).
func Supported(btp *bootstrapping.Evaluator) bool {
	return btp.EphemeralSecretWeight != 0 && btp.EvaluationKeys != nil && btp.EvkDenseToSparse != nil && btp.EvkSparseToDense != nil
}

// NewIfSupported is New for a bootstrapping that can discretise, and nil
// (no error) for one that cannot (Supported): the pipelines' constructor.
func NewIfSupported(btp *bootstrapping.Evaluator, dec *Decoding) (*Discretiser, error) {
	if !Supported(btp) {
		return nil, nil
	}
	return New(btp, dec)
}

// Decoding is a discretiser's decoding transformation: the
// bootstrapping's SlotsToCoeffs, unscaled, at its own levels. It depends
// on the bootstrapping's parameters only, and making it is the slow part
// of New (about 21 s of one core at the iris presets), as slow as making
// the bootstrapping evaluator (Lattigo's matrices, 17 s): both run on one
// goroutine each.
type Decoding struct {
	params bootstrapping.Parameters
	done   chan struct{} // closed when m and err are set
	m      dft.Matrix
	err    error
}

// StartDecoding starts making the decoding transformation of p on a
// goroutine of its own, so that a pipeline makes it while it makes its
// bootstrapping evaluators; New waits for it. It returns nil for
// parameters without the sparse-secret encapsulation, which cannot
// discretise.
func StartDecoding(p bootstrapping.Parameters) *Decoding {
	if p.EphemeralSecretWeight == 0 {
		return nil
	}
	d := &Decoding{params: p, done: make(chan struct{})}
	go func() {
		defer close(d.done)
		lit := p.SlotsToCoeffsParameters
		lit.Scaling = nil
		lit.LevelQ = lit.Depth(true)
		d.m, d.err = dft.NewMatrixFromLiteral(p.BootstrappingParameters, lit, ckks.NewEncoder(p.BootstrappingParameters))
	}()
	return d
}

// New makes the discretiser of btp, whose bootstrapping must use a sparse
// ephemeral secret (Supported), with the smallest comparator depth whose
// band fits in the gap between the integers' multiples. dec is the
// decoding StartDecoding began for btp's parameters, or nil (New makes
// it).
func New(btp *bootstrapping.Evaluator, dec *Decoding) (*Discretiser, error) {
	h := btp.EphemeralSecretWeight
	if !Supported(btp) {
		return nil, fmt.Errorf("%w: discretisation needs the bootstrapping's sparse-secret encapsulation (its rounding error grows with the secret's weight)", errs.ErrInvalid)
	}
	if dec == nil {
		dec = StartDecoding(btp.Parameters)
	}
	if !dec.params.BootstrappingParameters.Equal(&btp.BootstrappingParameters) || dec.params.SlotsToCoeffsParameters.LevelQ != btp.SlotsToCoeffsParameters.LevelQ {
		return nil, fmt.Errorf("%w: a decoding made for other bootstrapping parameters", errs.ErrMismatch)
	}
	d := &Discretiser{btp: btp, Bound: float64(1+h)/2 + 0.5, Bits: MinBits}
	for d.Bound >= math.Ldexp(1, d.Bits-1)-1 {
		d.Bits++
	}
	d.logV = d.Bits + btp.Mod1Parameters.LogMessageRatio
	if q0 := btp.BootstrappingParameters.Q()[0]; bits.Len64(q0) <= d.logV+8 {
		return nil, fmt.Errorf("%w: q0 of %d bits leaves no room for a modulus of 2^%d", errs.ErrInvalid, bits.Len64(q0), d.logV)
	}
	// x = i / 2^Bits lies in [-(Bound + 1) / 2^Bits, 1 + (Bound + 1) / 2^Bits].
	margin := (d.Bound + 1) / math.Ldexp(1, d.Bits)
	d.center, d.width = 0.5, 0.5+margin
	thr := (math.Ldexp(1, d.Bits-1) - 0.5) / math.Ldexp(1, d.Bits) // between 2^(Bits-1) - 1 and 2^(Bits-1)
	halfGap := 0.5 / math.Ldexp(1, d.Bits) / d.width
	lo, hi := comparator.KappaRange()
	levels := btp.SlotsToCoeffsParameters.LevelQ // EvalMod's output level
	for kappa := lo; kappa <= min(hi, levels); kappa++ {
		cmp, err := comparator.New(kappa, (thr-d.center)/d.width, 1)
		if err != nil {
			return nil, err
		}
		// The bootstrap's error and the comparator's band must fit in half
		// the gap.
		if cmp.ValueBand+BootstrapError/math.Ldexp(1, d.Bits)/d.width < halfGap {
			d.Comparator = cmp
			break
		}
	}
	if d.Comparator == nil {
		return nil, fmt.Errorf("%w: no comparator depth up to %d has a band within %.2e", errs.ErrInvalid, min(hi, levels), halfGap)
	}
	<-dec.done
	if dec.err != nil {
		return nil, dec.err
	}
	d.decode = dec.m
	return d, nil
}

// Possible says which bits a value v may be discretised to: the integers
// within Bound of 2^Bits v, split at 2^(Bits-1) (the plaintext model).
func (d *Discretiser) Possible(v float64) (zero, one bool) {
	u := math.Ldexp(v, d.Bits)
	half := math.Ldexp(1, d.Bits-1)
	return math.Ceil(u-d.Bound) < half, math.Floor(u+d.Bound) >= half
}

// Apply discretises the real values in the slots of ct (of btp's ring):
// the output's slots hold 0 or 1, within comparator.ValueTolerance and the
// evaluation's noise, in the same slots. The input is left unchanged.
func (d *Discretiser) Apply(ct *rlwe.Ciphertext) (*rlwe.Ciphertext, error) {
	x, err := d.Integers(ct)
	if err != nil {
		return nil, err
	}
	params := d.btp.BootstrappingParameters
	if err := d.btp.Add(x, -d.center/d.width, x); err != nil {
		return nil, err
	}
	pe := polynomial.NewEvaluator(params, ckks.NewEvaluator(params, d.btp.Evaluator.EvaluationKeySet))
	return d.Comparator.Evaluate(pe, x, params.DefaultScale())
}

// Integers is Apply before the comparator: the slots of its output hold
// i / (2^Bits width) (i the integer of each value, width the half-width
// of the comparator's interval) up to the bootstrap's error, at EvalMod's
// output level. Exported for the tests, which measure that error.
func (d *Discretiser) Integers(ct *rlwe.Ciphertext) (*rlwe.Ciphertext, error) {
	btp := d.btp
	x := ct.CopyNew()
	if x.Level() < d.decode.LevelQ {
		out, err := dftbatch.Bootstrap(btp, []*rlwe.Ciphertext{x})
		if err != nil {
			return nil, fmt.Errorf("discretisation: %w", err)
		}
		x = out[0]
	}
	btp.DropLevel(x, x.Level()-d.decode.LevelQ)
	// The slots' values into the coefficients (real parts in the first
	// N/2, imaginary parts, zero up to noise, in the others).
	x, err := btp.DFTEvaluator.SlotsToCoeffsNew(x, nil, d.decode)
	if err != nil {
		return nil, fmt.Errorf("discretisation, slots to coefficients: %w", err)
	}
	// Level 0, scale q0 / 2^LogMessageRatio: the phase is v q0 / 2^LogMessageRatio.
	if x, _, err = btp.ScaleDown(x); err != nil {
		return nil, fmt.Errorf("discretisation, scale down: %w", err)
	}
	if err := btp.ApplyEvaluationKey(x, btp.EvkDenseToSparse, x); err != nil {
		return nil, err
	}
	d.round(x)
	// Back to the dense secret: Lattigo's ModUp takes a ciphertext under it
	// (and switches to the sparse one itself).
	if err := btp.ApplyEvaluationKey(x, btp.EvkSparseToDense, x); err != nil {
		return nil, err
	}
	if x, err = btp.ModUp(x); err != nil {
		return nil, fmt.Errorf("discretisation, ModUp: %w", err)
	}
	re, _, err := btp.CoeffsToSlots(x)
	if err != nil {
		return nil, fmt.Errorf("discretisation, coefficients to slots: %w", err)
	}
	// EvalMod leaves the slots at Mod1's scaling / message ratio of the
	// message; the scaling puts the message at the default scale and
	// divides it by width (no level), as scoreslots.ToSlots does.
	mod := btp.Mod1Parameters
	scaling := btp.BootstrappingParameters.DefaultScale().Float64() * mod.MessageRatio() / mod.ScalingFactor().Float64() / d.width
	return btp.EvalModAndScale(re, complex(scaling, 0))
}

// round replaces each coefficient c of x (level 0, modulus q0, NTT form)
// by round(round(c V / q0) q0 / V), c and the inner rounding centred: the
// modulus switch to V = 2^logV and the lift back. Under a secret s of
// Hamming weight h, a phase p becomes (q0 / V) (V p / q0 + r) + r', where
// |r| <= (1 + h) / 2 (the inner rounding's errors times s) and |r'| <= (1 +
// h) / 2 (the outer one's); V p / q0 + r is an integer.
func (d *Discretiser) round(x *rlwe.Ciphertext) {
	params := d.btp.BootstrappingParameters
	r := params.RingQ().AtLevel(0)
	q0 := r.ModuliChain()[0]
	v := uint64(1) << d.logV
	for _, p := range x.Value {
		r.INTT(p, p)
		c := p.Coeffs[0]
		for j := range c {
			c[j] = lift(switchDown(c[j], q0, d.logV), q0, v, d.logV)
		}
		r.NTT(p, p)
	}
}

// switchDown is round(c V / q0) mod V for c in [0, q0) read centred, V =
// 2^logV, returned centred in [-V/2, V/2).
func switchDown(c, q0 uint64, logV int) int64 {
	neg := c > q0/2
	if neg {
		c = q0 - c
	}
	// round(c 2^logV / q0), c 2^logV < 2^(64 + logV) fits in 128 bits.
	hi, lo := bits.Mul64(c, 1<<logV)
	lo, carry := bits.Add64(lo, q0/2, 0)
	hi += carry
	y, _ := bits.Div64(hi, lo, q0)
	s := int64(y)
	if neg {
		s = -s
	}
	v := int64(1) << logV
	s = ((s+v/2)%v+v)%v - v/2
	return s
}

// lift is round(y q0 / V) mod q0 for y in [-V/2, V/2), V = 2^logV.
func lift(y int64, q0, v uint64, logV int) uint64 {
	neg := y < 0
	a := uint64(y)
	if neg {
		a = uint64(-y)
	}
	hi, lo := bits.Mul64(a, q0)
	lo, carry := bits.Add64(lo, v/2, 0)
	hi += carry
	z := lo>>logV | hi<<(64-logV)
	if neg && z != 0 {
		z = q0 - z
	}
	return z
}
