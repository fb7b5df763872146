package scoreslots

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"encmatch/core/base/errs"
	"encmatch/core/iris/ccmm"
	"encmatch/core/iris/internal/ccmmtest"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
	"github.com/tuneinsight/lattigo/v6/utils"
)

// toyCCMM is an INSECURE CCMM set with a three-prime Q, small enough for a
// test: database ring 2^10, query ring 2^9, 1,024 positions.
var toyCCMM = ccmm.Literal{LogNDB: 10, LogNQ: 9, LogQ: []int{20, 20, 20}, LogK: []int{20, 20, 20}, LogScale: 18, Inner: 1024}

// toyLiteral bootstraps it in ring 2^12 (four result ciphertexts per
// bootstrap, as the iris rings 2^14 -> 2^16), scores up to 2^10.
var toyLiteral = Literal{LogN2: 12, LogQ0: 55, LogP: []int{61}, ScoreBits: 10, Bootstrapping: DenseBootstrapping(160, 6, 56)}

// toySparseLiteral is toyLiteral with sparse-secret encapsulation.
var toySparseLiteral = Literal{LogN2: 12, LogQ0: 55, LogP: []int{61}, ScoreBits: 10, Bootstrapping: SparseBootstrapping([]int{61, 61})}

// toyParams builds the toy CCMM set and its bootstrapping by lit.
func toyParams(t *testing.T, lit Literal) (*ccmm.Params, *Params) {
	t.Helper()
	cp, err := ccmm.NewParams(toyCCMM)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewParams(cp, lit)
	if err != nil {
		t.Fatal(err)
	}
	return cp, p
}

// TestScoresToSlots runs a CCMM (public-key query, database under one
// secret), lifts its result columns to the residual parameters, checks
// them against the plaintext scores, half-bootstraps them and checks that
// every slot holds its score / 2^ScoreBits at the documented position:
// with a dense bootstrapping and with sparse-secret encapsulation.
func TestScoresToSlots(t *testing.T) {
	t.Run("dense", func(t *testing.T) { testScoresToSlots(t, toyLiteral) })
	t.Run("encapsulation", func(t *testing.T) { testScoresToSlots(t, toySparseLiteral) })
}

func testScoresToSlots(t *testing.T, lit Literal) {
	cp, p := toyParams(t, lit)
	rng := rand.New(rand.NewPCG(7, 7))
	d1, d3 := cp.NDB, 8
	mdb := ccmmtest.Codes(rng, d1, cp.Lit.Inner)
	mq := ccmmtest.Codes(rng, cp.Lit.Inner, d3)
	for l := 0; l < cp.Lit.Inner; l++ { // column 0 matches database row 5 (a genuine score near 2^10)
		mq.Data[l*d3] = mdb.At(5, l)
	}
	want, err := ccmm.MulInt(mdb, mq)
	if err != nil {
		t.Fatal(err)
	}
	sk, res := ccmmtest.Product(t, cp, mdb, mq)

	// The lifted ciphertexts decrypt to score / 2^ScoreBits under the
	// residual copy of the database secret.
	resSK, err := p.CCMM.SecretAs(sk.DB[0], p.Residual)
	if err != nil {
		t.Fatal(err)
	}
	unit := math.Ldexp(1, -p.Lit.ScoreBits)
	lifted, err := p.Lift(res, 0)
	if err != nil {
		t.Fatal(err)
	}
	worstLift := 0.0
	for j, ct := range lifted {
		for k, v := range decryptCoeffs(p.Residual, resSK, ct) {
			worstLift = math.Max(worstLift, math.Abs(v-float64(want.At(k, j))*unit))
		}
	}
	t.Logf("lifted to q0: largest error %.2g score units", worstLift/unit)
	if worstLift > 0.25*unit {
		t.Fatalf("lifted ciphertexts are off by %.3g score units", worstLift/unit)
	}

	keys, err := p.GenKeys(sk.DB[:1], nil)
	if err != nil {
		t.Fatal(err)
	}
	// The key back from N2 to the database ring would be samples under s_t
	// at the whole residual modulus: GenKeys keeps only a throwaway one,
	// which does not switch a ciphertext under the N2 secret to s_t.
	{
		bp := p.Bootstrap.BootstrappingParameters
		pt := ckks.NewPlaintext(bp, 0)
		if err := ckks.NewEncoder(bp).Encode([]float64{0.5, 0.25}, pt); err != nil {
			t.Fatal(err)
		}
		ct, _ := rlwe.NewEncryptor(bp, keys.Secret).EncryptNew(pt)
		back := ckks.NewCiphertext(p.Residual, 1, 0)
		if err := ckks.NewEvaluator(bp, nil).ApplyEvaluationKey(ct, p.ThrowawayKeyBack(), back); err != nil {
			t.Fatal(err)
		}
		largest := 0.0 // a real switch gives the encoding's coefficients, all below 1
		for _, v := range decryptCoeffs(p.Residual, resSK, back) {
			largest = math.Max(largest, math.Abs(v))
		}
		if largest < 100 {
			t.Fatalf("the key back to the database ring switches to s_t (coefficients decrypt below %.3g)", largest)
		}
	}
	evals, err := p.NewEvaluators(keys)
	if err != nil {
		t.Fatal(err)
	}
	sets, err := p.ToSlots(evals[:1], [][]*rlwe.Ciphertext{lifted})
	if err != nil {
		t.Fatal(err)
	}
	slots := sets[0]
	pack := 1 << (p.Lit.LogN2 - cp.Lit.LogNDB)
	if len(slots) != 2*d3/pack {
		t.Fatalf("%d slot ciphertexts for %d columns packed by %d, want %d", len(slots), d3, pack, 2*d3/pack)
	}
	worst, seen := 0.0, map[[2]int]bool{}
	for s, ct := range slots {
		vals := decryptSlots(p.Bootstrap.BootstrappingParameters, keys.Secret, ct)
		for i, v := range vals {
			input, row := p.SlotOf(s, i)
			seen[[2]int{input, row}] = true
			worst = math.Max(worst, math.Abs(real(v)-float64(want.At(row, input))*unit))
		}
	}
	if len(seen) != d1*d3 {
		t.Fatalf("the slots hold %d distinct scores, want %d", len(seen), d1*d3)
	}
	t.Logf("half-bootstrapped: largest slot error %.3g score units (%d scores, largest |score| %d)", worst/unit, d1*d3, want.MaxAbs())
	if worst > 0.5*unit {
		t.Fatalf("slots are off by %.3g score units", worst/unit)
	}
}

// TestSecurity: the toy sets fail the 128-bit table (small rings); the
// secure literals pass, the encapsulated one with its ephemeral secret
// checked against its source's bound and a negligible failure bound, and
// an ephemeral secret its source gives no figure for fails.
func TestSecurity(t *testing.T) {
	_, p := toyParams(t, toyLiteral)
	checks := p.Security()
	if len(checks) != 2 || p.Secure() == nil || !errors.Is(p.Secure(), ccmm.ErrInsecure) {
		t.Fatalf("toy set: checks %+v, Secure %v", checks, p.Secure())
	}
	if c := checks[1]; c.LogN != toyLiteral.LogN2 || c.OK {
		t.Fatalf("bootstrapping ring 2^12 at log QP %.0f passed the table: %+v", c.LogQ, c)
	}
	_, sp := toyParams(t, toySparseLiteral)
	if c := sp.Security(); len(c) != 3 || c[2].OK || c[2].Source == "" {
		t.Fatalf("toy encapsulation: %+v", c)
	}
	cp, err := ccmm.NewParams(ccmm.IrisBootstrap)
	if err != nil {
		t.Fatal(err)
	}
	cp3, err := ccmm.NewParams(ccmm.IrisCollective)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		cp     *ccmm.Params
		lit    Literal
		checks int
	}{{"IrisSecure", cp, IrisSecure, 3}, {"IrisSecureDense", cp, IrisSecureDense, 2}, {"IrisThreshold", cp3, IrisThreshold, 3}} {
		p, err := NewParams(c.cp, c.lit)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range p.Security() {
			t.Logf("%s: %-42s N=2^%d log Q %.1f max %d %s %s ok=%v", c.name, x.What, x.LogN, x.LogQ, x.MaxLogQ, x.Secret, x.Source, x.OK)
		}
		if n := len(p.Security()); n != c.checks || p.Secure() != nil {
			t.Fatalf("%s: %d checks, Secure: %v", c.name, n, p.Secure())
		}
		bp := p.Bootstrap.BootstrappingParameters
		t.Logf("%s: log QP %.1f, %d Q primes, %d P primes, EvalMod K %d (%d levels), failure bound 2^%.1f per bootstrap, 2^%.1f per key generation", c.name, bp.LogQP(),
			bp.QCount(), bp.PCount(), p.Bootstrap.Mod1ParametersLiteral.K, p.Bootstrap.Mod1ParametersLiteral.Depth(), p.EncapsulationFailure(), p.EphemeralKeyRisk())
	}
	p, err = NewParams(cp, IrisSecure)
	if err != nil {
		t.Fatal(err)
	}
	if f := p.EncapsulationFailure(); !(f < -100) {
		t.Fatalf("encapsulation failure bound 2^%.1f per bootstrap", f)
	}
	// Three parties' shares: the failure bounds hold at K = 32, and
	// Lattigo's K = 16 does not cover their sum (the bound says nothing:
	// NewParams refuses it).
	p, err = NewParams(cp, IrisThreshold)
	if err != nil {
		t.Fatal(err)
	}
	if f, r := p.EncapsulationFailure(), p.EphemeralKeyRisk(); !(f < -60) || !(r <= ephemeralKeyRiskTarget) {
		t.Fatalf("three shares: failure bound 2^%.1f per bootstrap, 2^%.1f per key generation", f, r)
	}
	narrow := IrisThreshold
	narrow.Bootstrapping.K = utils.Pointy(16)
	if _, err = NewParams(cp, narrow); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("three shares under K = 16 (the failure bound says nothing): %v", err)
	}
	mismatched := IrisThreshold
	mismatched.Bootstrapping.EphemeralSecretWeight = utils.Pointy(EphemeralWeight)
	if _, err := NewParams(cp, mismatched); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("three shares with Lattigo's weight at one share's: %v", err)
	}
	other := IrisSecure
	other.Bootstrapping.EphemeralSecretWeight = utils.Pointy(64)                               // the source states no figure for it
	other.Bootstrapping.K, other.Bootstrapping.Mod1Degree = utils.Pointy(32), utils.Pointy(63) // a reduction that covers it
	p, err = NewParams(cp, other)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Secure(); !errors.Is(err, ccmm.ErrInsecure) {
		t.Fatalf("an ephemeral secret of weight 64 passed: %v", err)
	}
}

// TestIrisSets: the Iris set's two-prime Q is refused by the bootstrap's
// message ratio, IrisBootstrap is accepted, and both pass the CCMM's
// 128-bit checks.
func TestIrisSets(t *testing.T) {
	lit := IrisSecure
	for _, c := range []struct {
		name string
		set  ccmm.Literal
		ok   bool
	}{{"Iris", ccmm.Iris, false}, {"IrisBootstrap", ccmm.IrisBootstrap, true}} {
		cp, err := ccmm.NewParams(c.set)
		if err != nil {
			t.Fatal(err)
		}
		if err := cp.Secure(); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		p, err := NewParams(cp, lit)
		if c.ok && err != nil || !c.ok && !errors.Is(err, ErrRatio) {
			t.Errorf("%s: NewParams gave %v", c.name, err)
		}
		if p != nil {
			t.Logf("%s: Q / (Delta 2^15) = 2^%.1f", c.name, p.LogRatio())
		}
	}
}

// TestRatioRefused: scores that fill the modulus (the secure Iris set,
// two 20-bit primes in Q against 2^14 scores at Delta = 2^22) are refused
// before any key is made.
func TestRatioRefused(t *testing.T) {
	cp, err := ccmm.NewParams(ccmm.Literal{LogNDB: 10, LogNQ: 9, LogQ: []int{20, 20}, LogK: []int{20, 20}, LogScale: 18, Inner: 1024})
	if err != nil {
		t.Fatal(err)
	}
	lit := toyLiteral
	lit.ScoreBits = 16
	if _, err := NewParams(cp, lit); !errors.Is(err, ErrRatio) {
		t.Fatalf("Q/(Delta 2^16) = 2^%.1f: got %v, want ErrRatio", 40.0-18-16, err)
	}
}

// decryptCoeffs decrypts a coefficient-encoded ciphertext: coefficient k
// over the scale.
func decryptCoeffs(p ckks.Parameters, sk *rlwe.SecretKey, ct *rlwe.Ciphertext) []float64 {
	pt := rlwe.NewDecryptor(p, sk).DecryptNew(ct)
	r := p.RingQ().AtLevel(pt.Level())
	if pt.IsNTT {
		r.INTT(pt.Value, pt.Value)
	}
	q := r.ModuliChain()[0]
	scale := ct.Scale.Float64()
	out := make([]float64, p.N())
	for k, v := range pt.Value.Coeffs[0] {
		x := float64(v)
		if v > q/2 {
			x -= float64(q)
		}
		out[k] = x / scale
	}
	return out
}

// decryptSlots decrypts and decodes a slot-encoded ciphertext.
func decryptSlots(p ckks.Parameters, sk *rlwe.SecretKey, ct *rlwe.Ciphertext) []complex128 {
	pt := rlwe.NewDecryptor(p, sk).DecryptNew(ct)
	vals := make([]complex128, ct.Slots())
	if err := ckks.NewEncoder(p).Decode(pt, vals); err != nil {
		panic(err)
	}
	return vals
}
