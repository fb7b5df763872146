package comparator

import (
	"math"
	"math/rand"
	"testing"

	"encmatch/core/base/params"

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
	for _, kappa := range []int{8, 12, 13} {
		for _, delta := range []float64{0.457, 0.3, -0.2, 0.95} {
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
			if maxErr > maxEncryptedError || wrong > 0 {
				t.Errorf("kappa=%d delta=%v: max |enc - model| = %.2e, %d wrong decisions outside band %.2e", kappa, delta, maxErr, wrong, c.DecisionBand)
			}
			t.Logf("kappa=%d delta=%.3f degrees=%v decision band=%.2e value band=%.4f max|enc-model|=2^%.1f", kappa, delta, c.Degrees, c.DecisionBand, c.ValueBand, math.Log2(maxErr))
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
	if level != 0 || maxErr > maxEncryptedError || wrong > 0 {
		t.Fatalf("level %d, max |enc - model| %.2e, %d wrong decisions", level, maxErr, wrong)
	}
	t.Logf("secure: max|enc-model|=2^%.1f", math.Log2(maxErr))
}

// maxEncryptedError bounds |encrypted - model| on every slot: with
// ValueTolerance/4 of design error, the CKKS noise may add up to half of
// ValueTolerance before a sum of 2^20 outputs could round to another count.
const maxEncryptedError = ValueTolerance / 2

// TestModelIsAStep checks the model against the exact step function, for
// every depth budget and thresholds across (-1, 1): the value band is the
// design gap (stretched by 1 + a|delta|), the values outside it are exactly
// 0 or 1 (to ValueTolerance), and the decision boundary is delta itself.
func TestModelIsAStep(t *testing.T) {
	lo, hi := KappaRange()
	if lo != params.MinKappa || hi != params.MaxKappa {
		t.Fatalf("composites cover kappa %d..%d, params accept %d..%d", lo, hi, params.MinKappa, params.MaxKappa)
	}
	for kappa := lo; kappa <= hi; kappa++ {
		for _, delta := range []float64{-0.99, -0.5, 0, 0.3, 0.457, 0.6, 0.9, 0.999} {
			c, err := New(kappa, delta, DefaultScoreScale)
			if err != nil {
				t.Fatal(err)
			}
			if c.SignError <= signTolerance && c.ValueBand > c.Gap {
				t.Errorf("kappa=%d delta=%v: value band %.5f exceeds the design gap %.5f", kappa, delta, c.ValueBand, c.Gap)
			}
			if c.DecisionBand > 2.0/(1<<20) {
				t.Errorf("kappa=%d delta=%v: decision band %.2e: the boundary is not at delta", kappa, delta, c.DecisionBand)
			}
			for s := -1.0; s <= 1; s += 1.0 / 4096 {
				if math.Abs(s-c.Delta) <= c.ValueBand {
					continue
				}
				exact := 0.0
				if s >= c.Delta {
					exact = 1
				}
				if math.Abs(c.Model(s)-exact) > ValueTolerance {
					t.Fatalf("kappa=%d: model(%.4f)=%.3e outside the value band", kappa, s, c.Model(s))
				}
			}
		}
	}
}

// TestDefaultMeetsOneHundredth is the guarantee of the default depth: a value
// band of at most 0.01 for every threshold in (-1, 1).
func TestDefaultMeetsOneHundredth(t *testing.T) {
	for delta := -0.999; delta < 1; delta += 0.037 {
		c, err := New(params.DefaultKappa, delta, DefaultScoreScale)
		if err != nil {
			t.Fatal(err)
		}
		if c.ValueBand > 0.01 || c.SignError > signTolerance {
			t.Errorf("delta=%.3f: value band %.4f (sign error %.2e)", delta, c.ValueBand, c.SignError)
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
	bad.stages = append([]bignum.Polynomial{bignum.NewPolynomial(bignum.Monomial, c.stages[0].Coeffs, [2]float64{-1, 1})}, c.stages[1:]...)
	set, _ := params.New(params.Toy, 8, 16)
	scores := testScores(300, c.Delta, rand.New(rand.NewSource(3)))
	got, _ := encryptedOutputs(t, set, &bad, scores)
	maxErr, wrong := checkAgainstModel(c, scores, got, 1e-3)
	if maxErr < 1e-2 || wrong == 0 {
		t.Fatalf("a monomial/Chebyshev mix-up went unnoticed (max err %.2e, %d wrong)", maxErr, wrong)
	}
}

func TestRejectsBadSpecs(t *testing.T) {
	for _, d := range []float64{math.NaN(), 1, -1, 2, math.Inf(1)} {
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

// TestBandsTable logs the guard-band table of docs/COMPARATOR.md
// (go test -v -run BandsTable ./comparator/) and checks that more depth
// never widens the value band.
func TestBandsTable(t *testing.T) {
	lo, hi := KappaRange()
	for _, delta := range []float64{0.3, 0.5, 0.9} {
		prev := 2.0
		for kappa := lo; kappa <= hi; kappa++ {
			c, err := New(kappa, delta, DefaultScoreScale)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("| %.1f | %d | %v | 2^%.1f | %.1e | %.4f |", delta, kappa, c.Degrees, math.Log2(c.SignError), c.DecisionBand, c.ValueBand)
			if c.ValueBand > prev*1.05 {
				t.Errorf("kappa=%d delta=%.3f: value band %.4f after %.4f", kappa, delta, c.ValueBand, prev)
			}
			prev = c.ValueBand
		}
	}
}
