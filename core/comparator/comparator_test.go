package comparator

import (
	"math"
	"math/rand"
	"testing"

	"encmatch/core/params"

	"github.com/tuneinsight/lattigo/v6/circuits/ckks/polynomial"
	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
	"github.com/tuneinsight/lattigo/v6/utils/bignum"
)

// testScores returns n scores in [-1, 1], half of them within 0.02 of delta,
// plus the exact edge cases.
func testScores(n int, delta float64, rng *rand.Rand) []float64 {
	s := []float64{-1, 1, 0, delta}
	for len(s) < n {
		if len(s)%2 == 0 {
			s = append(s, delta+(rng.Float64()*2-1)*0.02)
		} else {
			s = append(s, rng.Float64()*2-1)
		}
	}
	return s
}

// encryptedOutputs runs the comparator on encrypted scaled scores placed at
// level kappa (what the similarity step leaves) and returns the decrypted
// outputs and the output level.
func encryptedOutputs(t *testing.T, set *params.Set, c *Comparator, scores []float64) ([]float64, int) {
	t.Helper()
	p := set.CKKS
	kgen := rlwe.NewKeyGenerator(p)
	sk := kgen.GenSecretKeyNew()
	rlk := kgen.GenRelinearizationKeyNew(sk)
	ecd := ckks.NewEncoder(p)
	enc := rlwe.NewEncryptor(p, sk)
	dec := rlwe.NewDecryptor(p, sk)
	eval := ckks.NewEvaluator(p, rlwe.NewMemEvaluationKeySet(rlk))

	vals := make([]float64, p.MaxSlots())
	for i := range vals {
		vals[i] = c.ScoreScale * scores[i%len(scores)]
	}
	pt := ckks.NewPlaintext(p, c.Kappa)
	if err := ecd.Encode(vals, pt); err != nil {
		t.Fatal(err)
	}
	ct, err := enc.EncryptNew(pt)
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Evaluate(polynomial.NewEvaluator(p, eval), ct, p.DefaultScale())
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float64, p.MaxSlots())
	if err := ecd.Decode(dec.DecryptNew(out), got); err != nil {
		t.Fatal(err)
	}
	return got[:len(scores)], out.Level()
}

// checkAgainstModel is the acceptance check of the encrypted comparator:
// agreement with the plaintext model everywhere, and with the exact
// comparison outside the decision band.
func checkAgainstModel(c *Comparator, scores, got []float64, tol float64) (maxErr float64, wrongDecisions int) {
	for i, s := range scores {
		e := math.Abs(got[i] - c.Model(s))
		maxErr = math.Max(maxErr, e)
		if math.Abs(s-c.Delta) > c.DecisionBand && (got[i] >= 0.5) != (s >= c.Delta) {
			wrongDecisions++
		}
	}
	return
}

func TestEncryptedMatchesModelToy(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, kappa := range []int{8, 10} {
		for _, delta := range []float64{0.457, 0.3, -0.2} {
			set, err := params.New(params.Toy, kappa, 64)
			if err != nil {
				t.Fatal(err)
			}
			c, err := New(kappa, delta, DefaultScoreScale)
			if err != nil {
				t.Fatal(err)
			}
			scores := testScores(600, delta, rng)
			got, level := encryptedOutputs(t, set, c, scores)
			if level != 0 {
				t.Errorf("kappa=%d: output at level %d, want 0 (comparator must consume exactly kappa levels)", kappa, level)
			}
			maxErr, wrong := checkAgainstModel(c, scores, got, 1e-3)
			if maxErr > 1e-4 || wrong > 0 {
				t.Errorf("kappa=%d delta=%v: max |enc - model| = %.2e, %d wrong decisions outside band %.2e", kappa, delta, maxErr, wrong, c.DecisionBand)
			}
			t.Logf("kappa=%d delta=%.3f degree=%d decision band=%.2e value band=%.3f max|enc-model|=%.2e", kappa, delta, c.Degree, c.DecisionBand, c.ValueBand, maxErr)
		}
	}
}

func TestEncryptedMatchesModelSecure(t *testing.T) {
	if testing.Short() {
		t.Skip("secure parameters in -short mode")
	}
	set, err := params.New(params.Default, params.DefaultKappa, 512)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(params.DefaultKappa, 0.457, DefaultScoreScale)
	if err != nil {
		t.Fatal(err)
	}
	scores := testScores(1000, c.Delta, rand.New(rand.NewSource(2)))
	got, level := encryptedOutputs(t, set, c, scores)
	maxErr, wrong := checkAgainstModel(c, scores, got, 1e-3)
	if level != 0 || maxErr > 1e-4 || wrong > 0 {
		t.Fatalf("level %d, max |enc - model| %.2e, %d wrong decisions", level, maxErr, wrong)
	}
	t.Logf("secure: max|enc-model|=%.2e", maxErr)
}

// TestModelIsAStep checks the model against the exact step function: the
// guard bands are small and the values outside them are exactly 0 or 1.
func TestModelIsAStep(t *testing.T) {
	for _, kappa := range []int{8, 10} {
		c, err := New(kappa, 0.457, DefaultScoreScale)
		if err != nil {
			t.Fatal(err)
		}
		wantDecision := map[int]float64{8: 0.01, 10: 0.003}[kappa]
		wantValue := map[int]float64{8: 0.25, 10: 0.07}[kappa]
		if c.DecisionBand > wantDecision || c.ValueBand > wantValue {
			t.Errorf("kappa=%d bands decision=%.2e value=%.3f, want <= %.2e, %.3f", kappa, c.DecisionBand, c.ValueBand, wantDecision, wantValue)
		}
		for s := -1.0; s <= 1; s += 0.001 {
			if math.Abs(s-c.Delta) <= c.ValueBand {
				continue
			}
			exact := 0.0
			if s >= c.Delta {
				exact = 1
			}
			if math.Abs(c.Model(s)-exact) > ValueTolerance {
				t.Fatalf("kappa=%d: model(%.3f)=%.3e outside the value band", kappa, s, c.Model(s))
			}
		}
	}
}

// TestMonomialMixUpIsCaught reproduces the papers/003 bug (Chebyshev
// coefficients recombined as monomial ones) and shows that the acceptance
// check above rejects it.
func TestMonomialMixUpIsCaught(t *testing.T) {
	c, err := New(8, 0.457, DefaultScoreScale)
	if err != nil {
		t.Fatal(err)
	}
	bad := *c
	bad.stage1 = bignum.NewPolynomial(bignum.Monomial, c.stage1.Coeffs, [2]float64{-1, 1})
	set, _ := params.New(params.Toy, 8, 16)
	scores := testScores(300, c.Delta, rand.New(rand.NewSource(3)))
	got, _ := encryptedOutputs(t, set, &bad, scores)
	maxErr, wrong := checkAgainstModel(c, scores, got, 1e-3)
	if maxErr < 1e-2 || wrong == 0 {
		t.Fatalf("a monomial/Chebyshev mix-up went unnoticed (max err %.2e, %d wrong)", maxErr, wrong)
	}
}

func TestRejectsBadSpecs(t *testing.T) {
	for _, d := range []float64{math.NaN(), 1, -1, 2} {
		if _, err := New(8, d, DefaultScoreScale); err == nil {
			t.Errorf("delta %v accepted", d)
		}
	}
	if _, err := New(4, 0.5, DefaultScoreScale); err == nil {
		t.Error("kappa 4 accepted")
	}
	if _, err := New(8, 0.5, 0); err == nil {
		t.Error("scale 0 accepted")
	}
}

// TestBandsShrinkWithDepth logs the guard-band table of docs/COMPARATOR.md
// (go test -v -run BandsShrink ./comparator/) and checks that more depth
// never widens the bands.
func TestBandsShrinkWithDepth(t *testing.T) {
	for _, delta := range []float64{0.3, 0.457, 0.6} {
		prevD, prevV := 1.0, 2.0
		for kappa := params.MinKappa; kappa <= params.MaxKappa; kappa++ {
			c, err := New(kappa, delta, DefaultScoreScale)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("| %.3f | %d | %d | %.1e | %.4f |", delta, kappa, c.Degree, c.DecisionBand, c.ValueBand)
			if c.ValueBand > prevV*1.05 || c.DecisionBand > 0.05 {
				t.Errorf("kappa=%d delta=%.3f: bands %.2e/%.3f after %.2e/%.3f", kappa, delta, c.DecisionBand, c.ValueBand, prevD, prevV)
			}
			prevD, prevV = c.DecisionBand, c.ValueBand
		}
	}
}
