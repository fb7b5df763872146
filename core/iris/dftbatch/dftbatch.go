// Package dftbatch runs the steps of Lattigo's CKKS bootstrapping
// (circuits/ckks/bootstrapping) on many ciphertexts at once, one factor of
// the homomorphic DFT at a time across all of them.
//
// A bootstrap's CoeffsToSlots and SlotsToCoeffs are products of a few
// sparse linear transformations (three each at the iris preset), and each
// factor needs its own Galois keys: 11 to 15 of the 38 the whole transform
// uses at ring 2^16 (0.43 GB each). When the keys are read from disk on
// demand under a memory budget (package keycache) that holds one factor's
// keys but not all of them, bootstrapping ciphertexts one after the other
// reads most keys again for every ciphertext. Here every ciphertext goes
// through factor 1, then every one through factor 2, and so on, so each
// key is read about once per batch.
//
// The operations, their order and their results are Lattigo's
// (dft.Evaluator.CoeffsToSlots / SlotsToCoeffs and bootstrapping.Evaluator's
// ScaleDown, ModUp and EvalMod); only the loop order differs. Dense packing
// only (N/2 slots), the layout of every bootstrap in this project.
package dftbatch

import (
	"fmt"

	"encmatch/core/base/errs"
	"encmatch/core/base/parallel"

	"github.com/tuneinsight/lattigo/v6/circuits/ckks/bootstrapping"
	"github.com/tuneinsight/lattigo/v6/circuits/ckks/dft"
	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// CoeffsToSlots is eval.CoeffsToSlots on every ciphertext of cts (each
// ModUp-ed to the bootstrapping's top level): it returns the real and the
// imaginary parts of each input's coefficients in the slots. cts is left
// unchanged.
func CoeffsToSlots(eval *bootstrapping.Evaluator, cts []*rlwe.Ciphertext) (re, im []*rlwe.Ciphertext, err error) {
	mat := eval.C2SDFTMatrix
	params := eval.BootstrappingParameters
	if mat.LogSlots != params.LogMaxSlots() || (mat.Format != dft.SplitRealAndImag && mat.Format != dft.RepackImagAsReal) {
		return nil, nil, fmt.Errorf("%w: CoeffsToSlots over 2^%d of 2^%d slots (format %d): only dense packing is batched",
			errs.ErrInvalid, mat.LogSlots, params.LogMaxSlots(), mat.Format)
	}
	z := make([]*rlwe.Ciphertext, len(cts))
	for i := range z {
		z[i] = ckks.NewCiphertext(params, 1, mat.LevelQ)
	}
	if err := apply(eval.DFTEvaluator, mat, cts, z); err != nil {
		return nil, nil, fmt.Errorf("CoeffsToSlots: %w", err)
	}
	// z = Ecd(a + i b): a = (z + conj z) / 2 and b = -i (z - conj z) / 2,
	// the halves being in the DFT matrix (dft.Evaluator.CoeffsToSlots).
	re, im = make([]*rlwe.Ciphertext, len(cts)), make([]*rlwe.Ciphertext, len(cts))
	err = parallel.For(len(z), func(i int) error {
		conj, err := eval.DFTEvaluator.ConjugateNew(z[i])
		if err != nil {
			return err
		}
		imag, err := eval.DFTEvaluator.SubNew(z[i], conj)
		if err != nil {
			return err
		}
		if err = eval.DFTEvaluator.Mul(imag, -1i, imag); err != nil {
			return err
		}
		if err = eval.DFTEvaluator.Add(conj, z[i], conj); err != nil {
			return err
		}
		re[i], im[i] = conj, imag
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("CoeffsToSlots: %w", err)
	}
	return re, im, nil
}

// SlotsToCoeffs is eval.SlotsToCoeffs on every pair (re[i], im[i]): the
// ciphertexts whose coefficients hold re[i]'s slots plus i times im[i]'s.
func SlotsToCoeffs(eval *bootstrapping.Evaluator, re, im []*rlwe.Ciphertext) ([]*rlwe.Ciphertext, error) {
	mat := eval.S2CDFTMatrix
	if len(re) != len(im) {
		return nil, fmt.Errorf("%w: %d real and %d imaginary parts", errs.ErrInvalid, len(re), len(im))
	}
	out := make([]*rlwe.Ciphertext, len(re))
	err := parallel.For(len(re), func(i int) error {
		if re[i].Level() < mat.LevelQ || im[i].Level() < mat.LevelQ {
			return fmt.Errorf("%w: SlotsToCoeffs starts at level %d, the inputs are at %d and %d",
				errs.ErrInvalid, mat.LevelQ, re[i].Level(), im[i].Level())
		}
		out[i] = ckks.NewCiphertext(eval.BootstrappingParameters, 1, mat.LevelQ)
		if err := eval.DFTEvaluator.Mul(im[i], 1i, out[i]); err != nil {
			return err
		}
		return eval.DFTEvaluator.Add(out[i], re[i], out[i])
	})
	if err != nil {
		return nil, fmt.Errorf("SlotsToCoeffs: %w", err)
	}
	if err := apply(eval.DFTEvaluator, mat, out, out); err != nil {
		return nil, fmt.Errorf("SlotsToCoeffs: %w", err)
	}
	return out, nil
}

// Bootstrap is eval.Evaluate on every ciphertext of cts (ciphertexts of
// the bootstrapping ring; cts is left unchanged): ScaleDown, ModUp,
// CoeffsToSlots, EvalMod on both parts, SlotsToCoeffs. Evaluators with
// bootstrapping iterations or 128-bit precision are refused (their
// Evaluate is a different circuit).
//
// Unlike Lattigo's Evaluate, every output is labelled with the factor
// ScaleDown leaves on its message (its errScale: from level 0, the input
// is multiplied by round(r), r = q0 / (scale MessageRatio), where r was
// needed, up to 1 + 1/(2r) away; from higher levels a rescale's residue),
// so that each output holds its input's values at any input scale. From
// level 0 the message can then reach up to 1/(2r) past the message ratio:
// the caller's values must leave that room (values filling [-1, 1] came
// back wrong at r = 10.7 in tests; the fold's sums, well inside it, come
// back right at r = 31).
func Bootstrap(eval *bootstrapping.Evaluator, cts []*rlwe.Ciphertext) ([]*rlwe.Ciphertext, error) {
	if eval.IterationsParameters != nil || eval.ResidualParameters.PrecisionMode() == ckks.PREC128 {
		return nil, fmt.Errorf("%w: bootstrapping with iterations or 128-bit precision is not batched", errs.ErrInvalid)
	}
	up, errScales, err := modUp(eval, cts)
	if err != nil {
		return nil, err
	}
	re, im, err := CoeffsToSlots(eval, up)
	if err != nil {
		return nil, err
	}
	err = parallel.For(2*len(re), func(k int) error {
		part := re
		if k >= len(re) {
			part = im
		}
		ct, err := eval.EvalMod(part[k%len(re)])
		part[k%len(re)] = ct
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("EvalMod: %w", err)
	}
	out, err := SlotsToCoeffs(eval, re, im)
	if err != nil {
		return nil, err
	}
	for i, ct := range out {
		ct.Scale = ct.Scale.Mul(errScales[i])
	}
	return out, nil
}

// ModUp is eval.ScaleDown then eval.ModUp on a copy of every ciphertext of
// cts: each is brought to q0 at the message ratio of the modular
// reduction and lifted to the bootstrapping's top level.
func ModUp(eval *bootstrapping.Evaluator, cts []*rlwe.Ciphertext) ([]*rlwe.Ciphertext, error) {
	out, _, err := modUp(eval, cts)
	return out, err
}

// modUp is ModUp that also returns each ScaleDown's errScale.
func modUp(eval *bootstrapping.Evaluator, cts []*rlwe.Ciphertext) ([]*rlwe.Ciphertext, []rlwe.Scale, error) {
	out := make([]*rlwe.Ciphertext, len(cts))
	errScales := make([]rlwe.Scale, len(cts))
	err := parallel.For(len(cts), func(i int) error {
		ct, errScale, err := eval.ScaleDown(cts[i].CopyNew())
		if err != nil {
			return err
		}
		errScales[i] = *errScale
		out[i], err = eval.ModUp(ct)
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("ModUp: %w", err)
	}
	return out, errScales, nil
}

// apply evaluates the factors of mat on every in[i] into out[i] (which may
// be in[i]), a factor at a time across all ciphertexts, rescaling after
// each of mat's levels: dft.Evaluator's loop with its two loops swapped.
// out[i] takes in[i]'s slot dimensions.
func apply(eval *dft.Evaluator, mat dft.Matrix, in, out []*rlwe.Ciphertext) error {
	dims := make([]ring.Dimensions, len(in))
	for i, ct := range in {
		dims[i] = ct.LogDimensions
	}
	factor := 0
	for _, count := range mat.Levels {
		for range count {
			m, src := mat.Matrices[factor], out
			if factor == 0 {
				src = in
			}
			if err := parallel.For(len(out), func(i int) error {
				return eval.LTEvaluator.Evaluate(src[i], m, out[i])
			}); err != nil {
				return err
			}
			factor++
		}
		if err := parallel.For(len(out), func(i int) error { return eval.Rescale(out[i], out[i]) }); err != nil {
			return err
		}
	}
	for i := range out {
		out[i].LogDimensions = dims[i]
	}
	return nil
}
