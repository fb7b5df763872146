package dftbatch

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"encmatch/core/base/errs"

	"github.com/tuneinsight/lattigo/v6/circuits/ckks/bootstrapping"
	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
	"github.com/tuneinsight/lattigo/v6/utils"
)

// fixture is a bootstrapping evaluator at ring 2^12 (insecure, for tests)
// with the secret of its ring.
type fixture struct {
	eval *bootstrapping.Evaluator
	sk   *rlwe.SecretKey
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	res, err := ckks.NewParametersFromLiteral(ckks.ParametersLiteral{
		LogN: 12, LogQ: []int{55, 40, 40}, LogP: []int{61}, LogDefaultScale: 40, Xs: ring.Ternary{H: 192},
	})
	if err != nil {
		t.Fatal(err)
	}
	btp, err := bootstrapping.NewParametersFromLiteral(res, bootstrapping.ParametersLiteral{
		LogN: utils.Pointy(12), LogP: []int{61, 61}, Xs: ring.Ternary{H: 192},
	})
	if err != nil {
		t.Fatal(err)
	}
	sk := rlwe.NewKeyGenerator(res).GenSecretKeyNew()
	evk, skN2, err := btp.GenEvaluationKeys(sk)
	if err != nil {
		t.Fatal(err)
	}
	eval, err := bootstrapping.NewEvaluator(btp, evk)
	if err != nil {
		t.Fatal(err)
	}
	return fixture{eval: eval, sk: skN2}
}

// inputs returns n ciphertexts of the bootstrapping ring with random
// values in [-1, 1] (the third at level 2, the others at level 1), and the
// values.
func (f fixture) inputs(t *testing.T, n int) ([]*rlwe.Ciphertext, [][]float64) {
	t.Helper()
	params := f.eval.BootstrappingParameters
	rng := rand.New(rand.NewPCG(1, 2))
	var cts []*rlwe.Ciphertext
	var vals [][]float64
	for i := range n {
		v := make([]float64, params.MaxSlots())
		for k := range v {
			v[k] = 2*rng.Float64() - 1
		}
		pt := ckks.NewPlaintext(params, 1+i/2)
		if err := ckks.NewEncoder(params).Encode(v, pt); err != nil {
			t.Fatal(err)
		}
		ct, err := rlwe.NewEncryptor(params, f.sk).EncryptNew(pt)
		if err != nil {
			t.Fatal(err)
		}
		cts, vals = append(cts, ct), append(vals, v)
	}
	return cts, vals
}

// TestBootstrapEqualsLattigo: the batched bootstrap of three ciphertexts is
// bit for bit Lattigo's Evaluate of each (same operations, same order per
// ciphertext) with its scale's label times ScaleDown's factor, decrypts to
// the inputs, and leaves the inputs unchanged.
func TestBootstrapEqualsLattigo(t *testing.T) {
	f := newFixture(t)
	cts, vals := f.inputs(t, 3)
	before := make([]*rlwe.Ciphertext, len(cts))
	for i, ct := range cts {
		before[i] = ct.CopyNew()
	}
	got, err := Bootstrap(f.eval, cts)
	if err != nil {
		t.Fatal(err)
	}
	params := f.eval.BootstrappingParameters
	dec, enc := rlwe.NewDecryptor(params, f.sk), ckks.NewEncoder(params)
	for i, ct := range cts {
		if !ct.Equal(before[i]) {
			t.Fatalf("input %d modified", i)
		}
		want, err := f.eval.Evaluate(ct.CopyNew())
		if err != nil {
			t.Fatal(err)
		}
		_, errScale, err := f.eval.ScaleDown(ct.CopyNew())
		if err != nil {
			t.Fatal(err)
		}
		if got[i].Level() != want.Level() || !got[i].Scale.Equal(want.Scale.Mul(*errScale)) {
			t.Fatalf("ciphertext %d: level %d, scale %v; Lattigo's Evaluate: level %d, scale %v times ScaleDown's factor %v",
				i, got[i].Level(), &got[i].Scale.Value, want.Level(), &want.Scale.Value, &errScale.Value)
		}
		want.Scale = got[i].Scale
		if !got[i].Equal(want) {
			t.Fatalf("ciphertext %d differs from Lattigo's Evaluate", i)
		}
		out := make([]float64, params.MaxSlots())
		if err := enc.Decode(dec.DecryptNew(got[i]), out); err != nil {
			t.Fatal(err)
		}
		worst := 0.0
		for k := range out {
			worst = math.Max(worst, math.Abs(out[k]-vals[i][k]))
		}
		if worst > 1e-3 {
			t.Fatalf("ciphertext %d: bootstrapped values off by %.3g", i, worst)
		}
		t.Logf("ciphertext %d: largest error 2^%.1f", i, math.Log2(worst))
	}
}

// TestCoeffsToSlotsEqualsLattigo: the batched CoeffsToSlots gives
// Lattigo's real and imaginary parts bit for bit.
func TestCoeffsToSlotsEqualsLattigo(t *testing.T) {
	f := newFixture(t)
	cts, _ := f.inputs(t, 2)
	up, err := ModUp(f.eval, cts)
	if err != nil {
		t.Fatal(err)
	}
	re, im, err := CoeffsToSlots(f.eval, up)
	if err != nil {
		t.Fatal(err)
	}
	for i, ct := range up {
		wantRe, wantIm, err := f.eval.CoeffsToSlots(ct)
		if err != nil {
			t.Fatal(err)
		}
		if !re[i].Equal(wantRe) || !im[i].Equal(wantIm) || !re[i].Scale.Equal(wantRe.Scale) || re[i].LogDimensions != wantRe.LogDimensions {
			t.Fatalf("ciphertext %d: CoeffsToSlots differs from Lattigo's", i)
		}
	}
}

// TestSlotsToCoeffsRefusesBadInput: parts of different counts, or below
// the transform's level, are invalid arguments.
func TestSlotsToCoeffsRefusesBadInput(t *testing.T) {
	f := newFixture(t)
	cts, _ := f.inputs(t, 2)
	if _, err := SlotsToCoeffs(f.eval, cts, cts[:1]); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("1 imaginary part for 2 real ones: got %v", err)
	}
	if _, err := SlotsToCoeffs(f.eval, cts, cts); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("parts at level 1, below SlotsToCoeffs' level %d: got %v", f.eval.S2CDFTMatrix.LevelQ, err)
	}
}

// TestBootstrapFromLevelZero: ciphertexts at level 0 whose scale is a power
// of two, or three times one (r = q0 / (scale MessageRatio) of 2^14.4 and
// 42.7, where ScaleDown takes the message 0.78 % past the ratio), come back
// holding their values in [-1, 1] (Bootstrap labels the factor Lattigo's
// ScaleDown leaves on the message, round(r) / r).
func TestBootstrapFromLevelZero(t *testing.T) {
	f := newFixture(t)
	params := f.eval.BootstrappingParameters
	enc, dec := ckks.NewEncoder(params), rlwe.NewDecryptor(params, f.sk)
	rng := rand.New(rand.NewPCG(5, 6))
	for _, scale := range []float64{math.Exp2(40), math.Exp2(44), 3 * math.Exp2(30), 3 * math.Exp2(40)} {
		v := make([]float64, params.MaxSlots())
		for k := range v {
			v[k] = 2*rng.Float64() - 1
		}
		pt := ckks.NewPlaintext(params, 0)
		pt.Scale = rlwe.NewScale(scale)
		if err := enc.Encode(v, pt); err != nil {
			t.Fatal(err)
		}
		ct, err := rlwe.NewEncryptor(params, f.sk).EncryptNew(pt)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Bootstrap(f.eval, []*rlwe.Ciphertext{ct})
		if err != nil {
			t.Fatal(err)
		}
		out := make([]float64, params.MaxSlots())
		if err := enc.Decode(dec.DecryptNew(got[0]), out); err != nil {
			t.Fatal(err)
		}
		worst := 0.0
		for k := range out {
			worst = math.Max(worst, math.Abs(out[k]-v[k]))
		}
		t.Logf("scale 2^%.3f: largest error 2^%.1f", math.Log2(scale), math.Log2(worst))
		if worst > 1e-3 {
			t.Errorf("scale 2^%.3f: bootstrapped values off by %.3g", math.Log2(scale), worst)
		}
	}
}
