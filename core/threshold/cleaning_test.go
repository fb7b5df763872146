package threshold

import (
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/tuneinsight/lattigo/v6/circuits/ckks/polynomial"
	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
	"github.com/tuneinsight/lattigo/v6/utils/bignum"
)

// TestCleanedResultGap measures the quantity the secure-flooding design of
// docs/THRESHOLD.md ("Secure flooding: the design") rests on: the gap
// log2(scale / ||e||_inf) of a result of bits after cleaning, where e is
// the whole error in the coefficient domain, in which a decryption share
// floods it: the computation noise and the comparator's residual, which
// depends on the scores and must be hidden too. The bits arrive as the
// comparator leaves them, at scale 2^60 with a residual of up to 2^-21
// (docs/COMPARATOR.md), and are cleaned with 3x^2 - 2x^3 over a tail of
// 60-bit primes, ending on two primes (120 bits):
//
//   - plain: two cleanings by Lattigo's polynomial evaluator, rescaled
//     after each product, the bits at 2^70;
//   - unrescaled ([CKSS25] as papers/004 §5 uses it): one plain cleaning to
//     2^55, then x^2 (3 - 2x) with no rescale between its two products and
//     one rescale at the end, the bits at 2^105.
//
// The plain tail must give a 32-coefficient share its gap (papers/004: 32
// eyes), the unrescaled one a share of the whole ring. The ideal plaintext
// is encoded at 256 bits of precision (float64's 53 would cap the measured
// gap). ENCMATCH_CLEANING_LOGN=16 measures the iris ring (slow).
func TestCleanedResultGap(t *testing.T) {
	logN := 15
	if os.Getenv("ENCMATCH_CLEANING_LOGN") == "16" {
		logN = 16
	}
	lit := ckks.ParametersLiteral{LogN: logN, LogQ: []int{60, 60, 60, 60, 60, 60}, LogP: []int{61}, LogDefaultScale: 60, RingType: ring.Standard}
	p, err := ckks.NewParametersFromLiteral(lit)
	if err != nil {
		t.Fatal(err)
	}
	kg := rlwe.NewKeyGenerator(p)
	sk := kg.GenSecretKeyNew()
	eval := ckks.NewEvaluator(p, rlwe.NewMemEvaluationKeySet(kg.GenRelinearizationKeyNew(sk)))
	pe := polynomial.NewEvaluator(p, eval)
	enc, dec := rlwe.NewEncryptor(p, sk), rlwe.NewDecryptor(p, sk)
	clean := polynomial.NewPolynomial(bignum.NewPolynomial(bignum.Monomial, []float64{0, 0, 3, -2}, [2]float64{0, 1}))

	rng := rand.New(rand.NewPCG(1, uint64(logN)))
	bits, noisy := make([]float64, p.MaxSlots()), make([]float64, p.MaxSlots())
	for i := range bits {
		bits[i] = float64(rng.IntN(2))
		noisy[i] = bits[i] + (2*rng.Float64()-1)*math.Exp2(-21)
	}
	encrypt := func(level int) *rlwe.Ciphertext {
		pt := ckks.NewPlaintext(p, level)
		if err := ckks.NewEncoder(p).Encode(noisy, pt); err != nil {
			t.Fatal(err)
		}
		ct, err := enc.EncryptNew(pt)
		if err != nil {
			t.Fatal(err)
		}
		return ct
	}
	cleanTo := func(ct *rlwe.Ciphertext, logScale float64) *rlwe.Ciphertext {
		out, err := pe.Evaluate(ct, clean, rlwe.NewScale(math.Exp2(logScale)))
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	plain := cleanTo(cleanTo(encrypt(5), 60), 70)

	x := cleanTo(encrypt(4), 55)
	x2, err := eval.MulRelinNew(x, x)
	if err != nil {
		t.Fatal(err)
	}
	lin, err := eval.MulNew(x, -2)
	if err == nil {
		err = eval.Add(lin, 3, lin)
	}
	if err != nil {
		t.Fatal(err)
	}
	unrescaled, err := eval.MulRelinNew(x2, lin)
	if err == nil {
		err = eval.Rescale(unrescaled, unrescaled)
	}
	if err != nil {
		t.Fatal(err)
	}

	const decryptors = 3
	for _, c := range []struct {
		name  string
		ct    *rlwe.Ciphertext
		share int // coefficients a share must cover
	}{{"plain", plain, 32}, {"unrescaled", unrescaled, p.N()}} {
		if c.ct.Level() != 1 {
			t.Fatalf("%s: cleaned result at level %d, want 1 (two primes)", c.name, c.ct.Level())
		}
		gap := c.ct.Scale.Log2() - coefficientNoiseBits(p, dec, c.ct, bits)
		t.Logf("logN %d, %s: bits at scale 2^%.0f over %d bits, gap %.1f bits; needed at 2^-40 with t = %d: %.1f for 1 coefficient, %.1f for 32, %.1f for %d",
			logN, c.name, c.ct.Scale.Log2(), p.RingQ().AtLevel(1).Modulus().BitLen(), gap, decryptors,
			floodingGapNeeded(1, decryptors), floodingGapNeeded(32, decryptors), floodingGapNeeded(p.N(), decryptors), p.N())
		if need := floodingGapNeeded(c.share, decryptors); gap < need {
			t.Errorf("%s: gap %.1f bits < %.1f needed for a share of %d coefficients", c.name, gap, need, c.share)
		}
	}
}

// floodingGapNeeded is the gap log2(scale / B_e) that flooding a share of c
// coefficients to a statistical distance of 2^-40 needs with t decryptors,
// under an ideal discrete Gaussian of standard deviation sigma: each
// coefficient's distance is at most B_e / (sigma sqrt(2 pi)), so sigma =
// 2^40 c B_e / sqrt(2 pi); and the t floodings must stay within a quarter
// of the scale (the bits round correctly) at TailFactor standard
// deviations.
func floodingGapNeeded(c, t int) float64 {
	return 40 + math.Log2(float64(c)) - 0.5*math.Log2(2*math.Pi) + math.Log2(TailFactor) + 0.5*math.Log2(float64(t)) + 2
}

// idealPrecision is the encoder's precision, in bits, for the exact
// plaintext that coefficientNoiseBits subtracts.
const idealPrecision = 256

// coefficientNoiseBits is log2 of the infinity norm, over every coefficient
// of the decrypted polynomial (all of ct's primes, centred), of its
// difference from the exact encoding of want at ct's scale.
func coefficientNoiseBits(p ckks.Parameters, dec *rlwe.Decryptor, ct *rlwe.Ciphertext, want []float64) float64 {
	got := dec.DecryptNew(ct)
	ideal := ckks.NewPlaintext(p, ct.Level())
	ideal.Scale = ct.Scale
	if err := ckks.NewEncoder(p, idealPrecision).Encode(want, ideal); err != nil {
		panic(err)
	}
	rq := p.RingQ().AtLevel(ct.Level())
	rq.Sub(got.Value, ideal.Value, got.Value)
	rq.INTT(got.Value, got.Value)
	coeffs := make([]*big.Int, p.N())
	for i := range coeffs {
		coeffs[i] = new(big.Int)
	}
	rq.PolyToBigintCentered(got.Value, 1, coeffs)
	worst := new(big.Int)
	for _, c := range coeffs {
		if c.CmpAbs(worst) > 0 {
			worst.Abs(c)
		}
	}
	f, _ := new(big.Float).SetInt(worst).Float64()
	return math.Log2(f)
}
