package fold

import (
	"math"
	"math/rand/v2"
	"testing"

	"encmatch/core/iris/ccmm"
	"encmatch/core/iris/internal/ccmmtest"
	"encmatch/core/iris/slotdb"

	"github.com/tuneinsight/lattigo/v6/circuits/ckks/polynomial"
	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
	"github.com/tuneinsight/lattigo/v6/utils/bignum"
)

// design is the fold polynomial of docs/IRIS.md at t = 0.34, k = 16,
// degree 15 (bench-results/iris-fold-design, `encmatch iris fold --t
// 0.34`): f on [-1.32, 0.68], |f| <= 60.0004 there (the design's top),
// its tolerance on a sum 0.05.
var design = Polynomial{Lo: -1.32, Hi: 0.68, Chebyshev: []float64{
	13.225743775736195, 21.18155998167034, 8.936886978848028, -2.3650989805055422, -6.5212378247685185,
	-3.24468140479283, 2.5463171468292116, 5.27936938760781, 2.886163997962388, -2.4570990756025672,
	-6.9405288597895725, -8.192311551396035, -6.490238278568008, -3.6732058841674156, -1.4267612715314346,
	-0.3069603718418648}}

const designDelta, designTolerance, designTop = 0.32, 0.05, 60.00040246020531

// twoDesign is ccmmtest.TwoPolynomialDesign as a fold literal.
var twoDesign = func() Literal {
	d := ccmmtest.TwoPolynomialDesign
	return Literal{Delta: d.Delta, Top: d.Top, MaybeTop: d.MaybeTop,
		Poly: Polynomial{Lo: d.Lo, Hi: d.Hi, Chebyshev: d.F}, Maybe: &Polynomial{Lo: d.Lo, Hi: d.Hi, Chebyshev: d.H}}
}()

// toyCCMM is an INSECURE CCMM set with the fold's levels: database ring
// 2^10, 1,024 positions, Q two 20-bit primes (the sums' room) and seven
// of 30 bits (two for the normalisation, five for h), Delta = 2^28.
var toyCCMM = ccmm.Literal{LogNDB: 10, LogNQ: 9, Inner: 1024, LogScale: 28,
	LogQ: []int{20, 20, 30, 30, 30, 30, 30, 30, 30}, LogK: []int{20, 20, 30, 30, 30, 30, 30, 30, 30}}

func TestPolynomialEvalAndDepth(t *testing.T) {
	p := Polynomial{Chebyshev: []float64{1, 2, 3}, Lo: -1, Hi: 3} // 1 + 2u + 3 (2u^2 - 1), u = (x - 1) / 2
	for _, x := range []float64{-1, 0, 1, 2.5, 3} {
		u := (x - 1) / 2
		if got, want := p.Eval(x), 1+2*u+3*(2*u*u-1); math.Abs(got-want) > 1e-12 {
			t.Fatalf("Eval(%v) = %v, want %v", x, got, want)
		}
	}
	if p.Depth() != 2 || design.Depth() != 4 {
		t.Fatalf("depths %d and %d, want 2 and 4", p.Depth(), design.Depth())
	}
	// At the domain's ends u = +-1 and T_k(+-1) = (+-1)^k.
	var top, bottom float64
	for k, c := range design.Chebyshev {
		top, bottom = top+c, bottom+c*float64(1-2*(k%2))
	}
	if got := design.Eval(design.Hi); math.Abs(got-top) > 1e-9 {
		t.Fatalf("f(hi) = %v, want the coefficients' sum %v", got, top)
	}
	if got := design.Eval(design.Lo); math.Abs(got-bottom) > 1e-9 {
		t.Fatalf("f(lo) = %v, want their alternating sum %v", got, bottom)
	}
}

// fixture is a slot-encoded database of two blocks and a public-key query
// of two fold groups of k = 4 columns, multiplied by the CCMM (INSECURE
// toy set), with genuine pairs, pairs near the threshold from both sides,
// a code without common bits and impostors; and the fold's parameters.
type fixture struct {
	cp      *ccmm.Params
	p       *Params
	sk      *ccmm.Secrets
	res     *ccmm.SharedA
	dots    ccmm.IntMat
	overlap func(row, col int) int
	evals   map[int]*Evaluator
}

const groupSize = 4

func newFixture(t *testing.T) *fixture { return newFixtureWith(t, toyCCMM, 30) }

// toyMessageRatio is the log2 message ratio of the toy bootstrapping
// (Lattigo's default, as toySlots keeps it), for which the fixtures' sums
// are scaled (fold.Literal.LogMessageRatio).
const toyMessageRatio = 8

// newFixtureWith is newFixture over the CCMM set cl, f and h at working
// scale 2^logScale.
func newFixtureWith(t *testing.T, cl ccmm.Literal, logScale int) *fixture {
	t.Helper()
	enc, err := slotdb.NewEncoder(cl.LogNDB, 14)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(21, 4))
	n := enc.N()
	db := ccmmtest.Codes(rng, 2*n, cl.Inner)
	q := ccmmtest.Codes(rng, cl.Inner, 2*groupSize)
	ccmmtest.Plant(db, q, 5, 0, 0)       // a genuine pair (x = 1 - delta)
	ccmmtest.Plant(db, q, n+700, 1, 270) // FHD about 0.33, just a match
	ccmmtest.Plant(db, q, 9, 2, 290)     // FHD about 0.355, a near miss
	ccmmtest.Plant(db, q, 600, 5, 275)   // second group, close to the threshold
	for l := 0; l < db.Cols; l++ {       // row 11 masked everywhere: no common bit
		db.Data[11*db.Cols+l] = 0
	}
	encoded, err := enc.Encode(db)
	if err != nil {
		t.Fatal(err)
	}
	lit := cl
	lit.MaxAbsDB = encoded.MaxAbs()
	cp, err := ccmm.NewParams(lit)
	if err != nil {
		t.Fatal(err)
	}
	lit2 := twoDesign
	lit2.LogP, lit2.LogScale, lit2.GroupSize, lit2.LogMessageRatio = []int{61, 61}, logScale, groupSize, toyMessageRatio
	p, err := NewParams(cp, enc, lit2)
	if err != nil {
		t.Fatal(err)
	}
	sk, res := ccmmtest.Product(t, cp, encoded, q)
	dots, _ := ccmm.MulInt(db, q)
	overlap := ccmmtest.Overlap(db, q)
	return &fixture{cp: cp, p: p, sk: sk, res: res, dots: dots, overlap: overlap, evals: map[int]*Evaluator{}}
}

// cols are the columns of fold group g.
func (f *fixture) cols(g int) []int {
	out := make([]int, groupSize)
	for i := range out {
		out[i] = g*groupSize + i
	}
	return out
}

// group folds group g of block b: one sum per fold polynomial.
func (f *fixture) group(t *testing.T, b, g int) []*rlwe.Ciphertext {
	t.Helper()
	ev := f.evals[b]
	if ev == nil {
		keys, err := f.p.GenKeys(f.sk.DB[b])
		if err != nil {
			t.Fatal(err)
		}
		ev = f.p.NewEvaluator(keys)
		f.evals[b] = ev
	}
	ct, err := ev.Group(f.res, b, f.cols(g), f.overlap)
	if err != nil {
		t.Fatal(err)
	}
	return ct
}

// model is the plaintext model of group g of block b: one set of sums per
// fold polynomial.
func (f *fixture) model(b, g int) [][]float64 {
	return f.p.GroupModel(f.dots, b, f.cols(g), f.overlap)
}

// budgetCCMM is toyCCMM with the prime sizes of the iris modulus budget
// (irisBudget): two 20-bit primes for the sums (at scale 2^20), five of
// 29 bits for f and h (working scale 2^29), two of 22 at the top for the
// normalisation, Delta = 2^24 (INSECURE: toy ring).
var budgetCCMM = ccmm.Literal{LogNDB: 10, LogNQ: 9, Inner: 1024, LogScale: 24, Approximate: true,
	LogQ: []int{20, 20, 29, 29, 29, 29, 29, 22, 22}, LogK: []int{20, 20, 30, 30, 30, 30, 30, 30, 30}}

// TestGroupEqualsModel folds every (block, group) of the fixture with
// the two-polynomial design and checks every decrypted sum of f and of h
// against the plaintext model within the design's tolerance, with the
// toy set's primes and with the budget's; the toy keys fail the 128-bit
// check.
func TestGroupEqualsModel(t *testing.T) {
	t.Run("toy", func(t *testing.T) { testGroupEqualsModel(t, newFixture(t)) })
	t.Run("budget primes", func(t *testing.T) { testGroupEqualsModel(t, newFixtureWith(t, budgetCCMM, 29)) })
}

func testGroupEqualsModel(t *testing.T, f *fixture) {
	if err := ccmm.FailedChecks(f.p.Security()); err == nil {
		t.Fatal("the toy fold's keys pass the 128-bit check")
	}
	decoder := ckks.NewEncoder(f.p.CKKS)
	var worst, largest [2]float64
	for b := 0; b < 2; b++ {
		key, _ := f.cp.SecretAs(f.sk.DB[b], f.p.CKKS)
		dec := rlwe.NewDecryptor(f.p.CKKS, key)
		for g := 0; g < 2; g++ {
			sums, want := f.group(t, b, g), f.model(b, g)
			if len(sums) != 2 || len(want) != 2 {
				t.Fatalf("%d sums and %d models for two polynomials", len(sums), len(want))
			}
			for i, ct := range sums {
				slots := make([]complex128, f.p.CKKS.MaxSlots())
				if err := decoder.Decode(dec.DecryptNew(ct), slots); err != nil {
					t.Fatal(err)
				}
				got := slotdb.Unpack(slots)
				for m := range want[i] {
					worst[i], largest[i] = math.Max(worst[i], math.Abs(got[m]-want[i][m])), math.Max(largest[i], want[i][m])
				}
			}
		}
	}
	t.Logf("%d sums of %d: f's largest %.2f, error %.3g; h's largest %.2f, error %.3g (tolerance %v)",
		4*f.p.CKKS.N(), groupSize, largest[0], worst[0], largest[1], worst[1], designTolerance)
	if largest[0] < ccmmtest.TwoPolynomialDesign.SureAt || largest[1] < ccmmtest.TwoPolynomialDesign.MaybeAt {
		t.Fatalf("the largest sums are %.2f and %.2f, below sure and maybe: the planted genuine pair is not in the test", largest[0], largest[1])
	}
	if worst[0] > designTolerance || worst[1] > designTolerance {
		t.Fatalf("a sum is off by %.3g (f) or %.3g (h), over the design's tolerance %v", worst[0], worst[1], designTolerance)
	}
}

// TestIrisBudget checks the candidate budget at the iris size for the
// two-polynomial design: the database's Q K and the fold keys' Q P pass
// the 128-bit table, the slot noise bound of the product
// (slotdb.Encoder.NoiseBound) and the encoding's rounding bound stay
// within 0.25 score units each at c = 2^17, and the fold's parameters
// hold its levels.
func TestIrisBudget(t *testing.T) {
	cp, err := ccmm.NewParams(irisBudget(twoDesign.Depth()))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := slotdb.NewEncoder(14, 17)
	if err != nil {
		t.Fatal(err)
	}
	lit := twoDesign
	lit.LogP, lit.LogScale, lit.GroupSize, lit.LogMessageRatio = []int{61, 61}, 29, 16, toyMessageRatio
	p, err := NewParams(cp, enc, lit)
	if err != nil {
		t.Fatal(err)
	}
	checks := append(cp.Security(), p.Security()...)
	for _, c := range checks {
		t.Logf("%-40s N=2^%d log Q=%.1f (max %d) ok=%v", c.What, c.LogN, c.LogQ, c.MaxLogQ, c.OK)
	}
	if err := ccmm.FailedChecks(checks); err != nil {
		t.Fatal(err)
	}
	noise, rounding := enc.NoiseBound(cp), enc.ErrorBound(float64(cp.Lit.Inner))
	t.Logf("slot noise bound %.3f, rounding bound %.3f score units", noise, rounding)
	if noise > 0.25 || rounding > 0.25 {
		t.Fatalf("slot noise bound %.3f or rounding bound %.3f over 0.25", noise, rounding)
	}
}

// TestPolynomialPrecisionByLevelSize measures how precisely Lattigo's
// polynomial evaluator computes the design's f in ring 2^14 (the iris
// database ring) when every level is a prime of b bits and the working
// scale 2^b, on 8,192 points spread over f's domain: the reason Q's level
// primes are 30 bits or more (docs/IRIS.md, "Levels for f"). It checks
// that the error's standard deviation shrinks with the level size and,
// from 30 bits on, keeps a sum of 16 values within the design's tolerance
// at 8 standard deviations (8 x 4 rms <= 0.05). The largest errors have
// a heavy tail (they come with f's largest values): they are logged.
func TestPolynomialPrecisionByLevelSize(t *testing.T) {
	sizes := []int{24, 28, 30, 32, 36}
	if testing.Short() {
		sizes = []int{24, 30}
	}
	prev := math.Inf(1)
	for _, b := range sizes {
		logQ := []int{b + 10} // room for |f| <= 60 at scale 2^b
		for range design.Depth() {
			logQ = append(logQ, b)
		}
		params, err := ckks.NewParametersFromLiteral(ckks.ParametersLiteral{LogN: 14, LogQ: logQ, LogP: []int{50, 50},
			Xs: ring.Ternary{P: 2.0 / 3}, LogDefaultScale: b})
		if err != nil {
			t.Fatal(err)
		}
		kg := rlwe.NewKeyGenerator(params)
		sk := kg.GenSecretKeyNew()
		eval := ckks.NewEvaluator(params, rlwe.NewMemEvaluationKeySet(kg.GenRelinearizationKeyNew(sk)))
		enc := ckks.NewEncoder(params)
		rng := rand.New(rand.NewPCG(1, uint64(b)))
		xs, us := make([]float64, params.MaxSlots()), make([]float64, params.MaxSlots())
		for i := range xs {
			xs[i] = design.Lo + (design.Hi-design.Lo)*rng.Float64()
			us[i] = (2*xs[i] - design.Lo - design.Hi) / (design.Hi - design.Lo)
		}
		pt := ckks.NewPlaintext(params, params.MaxLevel())
		if err := enc.Encode(us, pt); err != nil {
			t.Fatal(err)
		}
		ct, _ := rlwe.NewEncryptor(params, sk).EncryptNew(pt)
		poly := bignum.NewPolynomial(bignum.Chebyshev, design.Chebyshev, [2]float64{-1, 1})
		out, err := polynomial.NewEvaluator(params, eval).Evaluate(ct, polynomial.NewPolynomial(poly), params.DefaultScale())
		if err != nil {
			t.Fatal(err)
		}
		got := make([]float64, params.MaxSlots())
		if err := enc.Decode(rlwe.NewDecryptor(params, sk).DecryptNew(out), got); err != nil {
			t.Fatal(err)
		}
		worst, sq := 0.0, 0.0
		for i, x := range xs {
			d := got[i] - design.Eval(x)
			worst, sq = math.Max(worst, math.Abs(d)), sq+d*d
		}
		rms := math.Sqrt(sq / float64(len(xs)))
		t.Logf("levels of %d bits: largest error of f %.3g, rms %.3g", b, worst, rms)
		if rms >= prev {
			t.Fatalf("%d-bit levels: rms error %.3g, not below the smaller levels' %.3g", b, rms, prev)
		}
		if b >= 30 && 8*4*rms > designTolerance {
			t.Fatalf("%d-bit levels: rms error %.3g, a sum of 16 reaches %.3g at 8 standard deviations", b, rms, 32*rms)
		}
		prev = rms
	}
}
