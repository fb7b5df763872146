package foldmatch

import (
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"encmatch/core/iris/ccmm"
	"encmatch/core/iris/fold"
	"encmatch/core/iris/internal/ccmmtest"
	"encmatch/core/iris/scoreslots"
	"encmatch/core/iris/slotdb"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// toyCCMM is an INSECURE CCMM set with the fold's levels (package fold's
// test set): database ring 2^10, 1,024 positions, Q two 20-bit primes and
// seven of 30 bits, Delta = 2^28.
var toyCCMM = ccmm.Literal{LogNDB: 10, LogNQ: 9, Inner: 1024, LogScale: 28,
	LogQ: []int{20, 20, 30, 30, 30, 30, 30, 30, 30}, LogK: []int{20, 20, 30, 30, 30, 30, 30, 30, 30}}

const toyKappa = 10

// toySlots bootstraps in ring 2^12 (four sums per bootstrap), with
// toyKappa + 1 levels after it (INSECURE: toy rings).
var toySlots = scoreslots.Literal{LogN2: 12, LogQ0: 55, LogP: []int{61}, ScoreBits: 15, Levels: toyKappa + 1, LogLevel: 36,
	Bootstrapping: scoreslots.SparseBootstrapping([]int{61, 61})}

// logStats logs what a Match did.
func logStats(t *testing.T, st *Stats) {
	t.Logf("%d fold groups, %d refreshes, %d classified, %d reduction bootstraps, one eye per bootstrap %v, bands %.3g; wall %v (fold %v, refresh %v, classify %v, reduce %v)",
		st.Groups, st.Refreshes, st.Classified, st.ReductionBootstraps, st.OnePerBootstrap, st.Bands, st.Wall, st.Fold, st.Refresh, st.Classify, st.Reduce)
}

// withScales sets a fold literal's special primes and scale for toyCCMM,
// its sums for groups of k and toySlots' message ratio (Lattigo's default).
func withScales(lit fold.Literal, k int) fold.Literal {
	lit.LogP, lit.LogScale, lit.GroupSize, lit.LogMessageRatio = []int{61, 61}, 30, k, 8
	return lit
}

// toyParams are the fold of the two-polynomial design (f alone without
// maybe) and toySlots after cp.
func toyParams(t *testing.T, cp *ccmm.Params, enc *slotdb.Encoder, maybe bool) (*fold.Params, *scoreslots.Params) {
	t.Helper()
	d := ccmmtest.TwoPolynomialDesign
	lit := withScales(fold.Literal{Delta: d.Delta, Top: d.Top, Poly: fold.Polynomial{Lo: d.Lo, Hi: d.Hi, Chebyshev: d.F}}, 2)
	if maybe {
		lit.Maybe, lit.MaybeTop = &fold.Polynomial{Lo: d.Lo, Hi: d.Hi, Chebyshev: d.H}, d.MaybeTop
	}
	fp, err := fold.NewParams(cp, enc, lit)
	if err != nil {
		t.Fatal(err)
	}
	s, err := scoreslots.NewParams(cp, toySlots)
	if err != nil {
		t.Fatal(err)
	}
	return fp, s
}

// genKeys makes the bootstrapping keys (with GaloisElements) and the fold
// keys of the database secrets, as the key holder does.
func genKeys(t *testing.T, fp *fold.Params, s *scoreslots.Params, dbSecrets []*rlwe.SecretKey) (*scoreslots.Keys, []rlwe.EvaluationKeySet) {
	t.Helper()
	keys, err := s.GenKeys(dbSecrets, GaloisElements(s))
	if err != nil {
		t.Fatal(err)
	}
	var foldKeys []rlwe.EvaluationKeySet
	for _, dbs := range dbSecrets {
		k, err := fp.GenKeys(dbs)
		if err != nil {
			t.Fatal(err)
		}
		foldKeys = append(foldKeys, k)
	}
	return keys, foldKeys
}

// toyLiteral classifies sums of two rotations of the two-polynomial
// design at thresholds 16 (sure) and 0.5 (maybe), with tolerances that
// the kappa-10 comparator's bands fit (a test of the encrypted path
// against its model, not a design).
func toyLiteral() Literal {
	d := ccmmtest.TwoPolynomialDesign
	return Literal{Kappa: toyKappa, Rotations: 4, GroupSize: 2, EvalError: 0.05,
		Sure:  Classifier{At: 16, Range: [2]float64{-0.04, 2 * d.Top}, Tolerance: 4},
		Maybe: &Classifier{At: 0.5, Range: [2]float64{-0.04, 2 * d.MaybeTop}, Tolerance: 0.35}}
}

// TestMatchEqualsModel runs Algorithm 2 on a toy database of two blocks
// and four eyes of four rotations (two fold groups each): an eye with a
// genuine pair (a match), one whose best pair is past the threshold at
// FHD 0.31 (f's sums stay low, h's rise: flagged), one without a planted
// pair (no match) and one with a genuine pair in the second block at FHD
// 0.1 (a match). Every bit of the fixture is settled (no sum inside a
// comparator's band), every one must come back as the model's, and the
// answers must be those four.
func TestMatchEqualsModel(t *testing.T) {
	enc, err := slotdb.NewEncoder(toyCCMM.LogNDB, 14)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 3))
	n := enc.N()
	lit := toyLiteral()
	db := ccmmtest.Codes(rng, 2*n, toyCCMM.Inner)
	q := ccmmtest.Codes(rng, toyCCMM.Inner, 4*lit.Rotations)
	ccmmtest.Plant(db, q, 5, 1, 0)          // eye 0: genuine
	ccmmtest.Plant(db, q, 300, 4+2, 240)    // eye 1: FHD about 0.31, past the threshold
	ccmmtest.Plant(db, q, n+700, 3*4+3, 82) // eye 3: FHD about 0.1
	encoded, err := enc.Encode(db)
	if err != nil {
		t.Fatal(err)
	}
	cl := toyCCMM
	cl.MaxAbsDB = encoded.MaxAbs()
	cp, err := ccmm.NewParams(cl)
	if err != nil {
		t.Fatal(err)
	}
	fp, s := toyParams(t, cp, enc, true)
	sk, res := ccmmtest.Product(t, cp, encoded, q)
	keys, foldKeys := genKeys(t, fp, s, sk.DB)
	pl, err := NewPipeline(fp, s, foldKeys, keys, lit)
	if err != nil {
		t.Fatal(err)
	}
	dots, _ := ccmm.MulInt(db, q)
	overlap := ccmmtest.Overlap(db, q)
	model := pl.Model(dots, nil, overlap)
	sure, maybe, st, err := pl.Match(res, nil, overlap)
	if err != nil {
		t.Fatal(err)
	}
	logStats(t, st)
	bp := s.Bootstrap.BootstrappingParameters
	dec, decoder := rlwe.NewDecryptor(bp, keys.Secret), ckks.NewEncoder(bp)
	read := func(ct *rlwe.Ciphertext) []float64 {
		v := make([]float64, bp.MaxSlots())
		if err := decoder.Decode(dec.DecryptNew(ct), v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	sv, mv := read(sure), read(maybe)
	want := []Answer{Match, Flagged, NoMatch, Match}
	for e, m := range model {
		gs, gm := sv[ResultSlot(s, e, pl.Groups())], mv[ResultSlot(s, e, pl.Groups())]
		t.Logf("eye %d: sure %.4f (model %v), maybe %.4f (model %v)", e, gs, m.Sure, gm, m.Maybe)
		if !m.SureSettled || !m.MaybeSettled {
			t.Fatalf("eye %d has a sum inside a comparator's band: the fixture no longer tests its bits", e)
		}
		if (gs > 0.5) != m.Sure || (gm > 0.5) != m.Maybe {
			t.Errorf("eye %d: bits %.4f, %.4f against the model's settled %v, %v", e, gs, gm, m.Sure, m.Maybe)
		}
		if got := Read(gs > 0.5, gm > 0.5); got != want[e] {
			t.Errorf("eye %d: answer %d, want %d", e, got, want[e])
		}
	}
	// The pair pass on eyes 1 (flagged) and 2: groups of one rotation,
	// f(x) = x, one classifier at x >= 0, with the same keys.
	delta := ccmmtest.TwoPolynomialDesign.Delta
	pfp, err := fold.NewParams(cp, enc, withScales(PairFold(delta), 1))
	if err != nil {
		t.Fatal(err)
	}
	pairs, err := NewPipeline(pfp, s, foldKeys, keys, Literal{Kappa: toyKappa, Rotations: lit.Rotations, GroupSize: 1, EvalError: 0.01,
		Sure: PairClassifier(delta, 0.1)})
	if err != nil {
		t.Fatal(err)
	}
	flagged := []int{1, 2}
	model = pairs.Model(dots, flagged, overlap)
	sure, maybe, st, err = pairs.Match(res, flagged, overlap)
	if err != nil {
		t.Fatal(err)
	}
	logStats(t, st)
	if maybe != nil || !st.OnePerBootstrap {
		t.Fatalf("the pair pass computed maybe bits (%v) or packed several eyes per bootstrap (%v)", maybe != nil, !st.OnePerBootstrap)
	}
	sv = read(sure)
	for i, m := range model {
		got := sv[ResultSlot(s, i, pairs.Groups())]
		t.Logf("pair pass, eye %d: %.4f (model %v)", flagged[i], got, m.Sure)
		if !m.SureSettled || (got > 0.5) != m.Sure || m.Sure != (i == 0) {
			t.Errorf("pair pass, eye %d: bit %.4f, model %v (settled %v), want a match for eye 1 only", flagged[i], got, m.Sure, m.SureSettled)
		}
	}
}

// TestNewPipelineRefusesWideBands: a tolerance narrower than the
// comparator's band on the sums is refused with a message that says so.
func TestNewPipelineRefusesWideBands(t *testing.T) {
	lit := toyLiteral()
	lit.Sure.Tolerance = 1
	enc, _ := slotdb.NewEncoder(toyCCMM.LogNDB, 14)
	cl := toyCCMM
	cl.MaxAbsDB = 1 << 10
	cp, err := ccmm.NewParams(cl)
	if err != nil {
		t.Fatal(err)
	}
	fp, s := toyParams(t, cp, enc, false)
	sk, err := cp.GenSecrets(2 * cp.NDB)
	if err != nil {
		t.Fatal(err)
	}
	keys, foldKeys := genKeys(t, fp, s, sk.DB)
	_, err = NewPipeline(fp, s, foldKeys, keys, lit)
	if err == nil || !strings.Contains(err.Error(), "tolerance") {
		t.Fatalf("a tolerance of 1 under the kappa-%d band: %v", toyKappa, err)
	}
	lit = toyLiteral()
	lit.Maybe.Range[1] = 1 // f's sums (one polynomial: f decides maybe too) reach 120
	if _, err = NewPipeline(fp, s, foldKeys, keys, lit); err == nil || !strings.Contains(err.Error(), "above their range") {
		t.Fatalf("a range below the sums: %v", err)
	}
}

// TestCheckDesigns checks python's designs against the comparators
// without keys (fold.ReadDesign, DesignLiteral, Check) at the iris
// budget's ring: the kappa-12 design fits kappa 12 and not kappa 11; the
// two-polynomial design whose sure tolerance is 2 fits neither kappa 12
// nor 13 (docs/IRIS.md, "What the comparator must resolve").
func TestCheckDesigns(t *testing.T) {
	enc, err := slotdb.NewEncoder(14, 17)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := ccmm.NewParams(ccmm.Literal{LogNDB: 14, LogNQ: 14, Inner: 1 << 14, LogScale: 24, Approximate: true, MaxAbsDB: 1 << 13,
		LogQ: []int{20, 20, 29, 29, 29, 29, 29, 22, 22}, LogK: []int{30, 30, 30, 30, 30, 29, 29}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		file  string
		kappa int
		fits  bool
	}{{"design-kappa12.json", 12, true}, {"design-kappa12.json", 11, false}, {"design-two-h31.json", 12, false}, {"design-two-h31.json", 13, false}} {
		data, err := os.ReadFile("../fold/testdata/" + c.file)
		if err != nil {
			t.Fatal(err)
		}
		d, err := fold.ReadDesign(data)
		if err != nil {
			t.Fatal(err)
		}
		flit := withScales(d.Literal(), d.K)
		flit.LogScale = 29
		fp, err := fold.NewParams(cp, enc, flit)
		if err != nil {
			t.Fatal(err)
		}
		err = Check(fp, DesignLiteral(d, c.kappa, 31, 0.05))
		t.Logf("%s at kappa %d: %v", c.file, c.kappa, err)
		if (err == nil) != c.fits || (err != nil && !strings.Contains(err.Error(), "tolerance")) {
			t.Errorf("%s at kappa %d: %v, want fits = %v", c.file, c.kappa, err, c.fits)
		}
	}
}
