package collective_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"encmatch/core/base/errs"
	"encmatch/core/iris/ccmm"
	"encmatch/core/iris/collective"
	"encmatch/core/iris/internal/ccmmtest"
	"encmatch/core/iris/internal/collectivetest"
	"encmatch/core/iris/scoreslots"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/multiparty"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// toyCCMM is an INSECURE CCMM set small enough for a test: database ring
// 2^10, query ring 2^9, 1,024 positions.
var toyCCMM = ccmm.Literal{LogNDB: 10, LogNQ: 9, LogQ: []int{20, 20, 20}, LogK: []int{20, 20, 20}, LogScale: 18, Inner: 1024}

// toyCollectiveCCMM is toyCCMM for three parties' query and database
// secrets, with K two bits larger per prime for the larger noise of a
// database enrolled with public keys (ccmm.Literal.DBShares).
var toyCollectiveCCMM = ccmm.Literal{LogNDB: 10, LogNQ: 9, LogQ: []int{20, 20, 20}, LogK: []int{22, 22, 22}, LogScale: 18, Inner: 1024,
	QueryShares: parties, DBShares: parties}

// toyThreshold bootstraps it in ring 2^12 (INSECURE) with an ephemeral
// secret of three parties' shares, the reduction covering |I| < 32 as
// scoreslots.IrisThreshold's does.
var toyThreshold = scoreslots.Literal{LogN2: 12, LogQ0: 55, LogP: []int{61}, ScoreBits: 10, EphemeralShares: 3,
	Bootstrapping: scoreslots.CollectiveSparseBootstrapping([]int{61, 61}, 3, 32)}

const parties = 3

var seed = []byte("encmatch test common reference seed")

// TestCollectiveHalfBootstrap runs the iris half-bootstrap (package
// scoreslots: lift, packing, ModUp under the ephemeral secret,
// CoeffsToSlots, EvalMod) on a CCMM result with every key made by three
// parties through this package (collectivetest.New: the query public key,
// the database block's key into the bootstrapping ring, the
// relinearisation and Galois keys of the parties' dense shares, and the
// encapsulation keys, whose ephemeral secret no party holds). Every slot
// must hold its score / 2^ScoreBits at the documented position. The
// database is enrolled with public keys and the parties' EncS
// contributions (collectivetest.Setup.Enroll); the test decrypts with the
// summed dense secret.
func TestCollectiveHalfBootstrap(t *testing.T) {
	cp, err := ccmm.NewParams(toyCollectiveCCMM)
	if err != nil {
		t.Fatal(err)
	}
	p, err := scoreslots.NewParams(cp, toyThreshold)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("failure bounds: 2^%.1f per bootstrap, 2^%.1f per key generation", p.EncapsulationFailure(), p.EphemeralKeyRisk())
	bp := p.Bootstrap.BootstrappingParameters
	setup := collectivetest.New(t, p, 1, nil, seed)

	rng := rand.New(rand.NewPCG(3, 4))
	cols := 8
	mdb := ccmmtest.Codes(rng, cp.NDB, cp.Lit.Inner)
	mq := ccmmtest.Codes(rng, cp.Lit.Inner, cols)
	ccmmtest.Plant(mdb, mq, 5, 0, 0)
	want, err := ccmm.MulInt(mdb, mq)
	if err != nil {
		t.Fatal(err)
	}
	lifted, err := p.Lift(setup.Product(t, cp, mdb, mq), 0)
	if err != nil {
		t.Fatal(err)
	}
	evals, err := p.NewEvaluators(setup.Keys)
	if err != nil {
		t.Fatal(err)
	}
	sets, err := p.ToSlots(evals[:1], [][]*rlwe.Ciphertext{lifted})
	if err != nil {
		t.Fatal(err)
	}
	unit := math.Ldexp(1, -p.Lit.ScoreBits)
	worst, seen := 0.0, map[[2]int]bool{}
	dec, ecd := rlwe.NewDecryptor(bp, setup.Keys.Secret), ckks.NewEncoder(bp)
	for s, ct := range sets[0] {
		vals := make([]complex128, ct.Slots())
		if err := ecd.Decode(dec.DecryptNew(ct), vals); err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			input, row := p.SlotOf(s, i)
			seen[[2]int{input, row}] = true
			worst = math.Max(worst, math.Abs(real(v)-float64(want.At(row, input))*unit))
		}
	}
	if len(seen) != cp.NDB*cols {
		t.Fatalf("the slots hold %d distinct scores, want %d", len(seen), cp.NDB*cols)
	}
	t.Logf("half-bootstrapped under three parties' keys: largest slot error %.3g score units (%d scores, largest |score| %d)",
		worst/unit, cp.NDB*cols, want.MaxAbs())
	if worst > 0.5*unit {
		t.Fatalf("slots are off by %.3g score units", worst/unit)
	}
}

// TestRefusals: one holder's parameters have nothing to make
// collectively, a short seed is refused, and every protocol refuses the
// shares of fewer parties than the setup has.
func TestRefusals(t *testing.T) {
	cp, err := ccmm.NewParams(toyCCMM)
	if err != nil {
		t.Fatal(err)
	}
	single := toyThreshold
	single.EphemeralShares = 0
	single.Bootstrapping = scoreslots.SparseBootstrapping([]int{61, 61})
	p, err := scoreslots.NewParams(cp, single)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := collective.NewParty(p); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("a party for one holder's parameters: %v", err)
	}
	if p, err = scoreslots.NewParams(cp, toyThreshold); err != nil {
		t.Fatal(err)
	}
	if _, err := collective.NewEncapsulationKeyGen(p, seed[:8]); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("an 8-byte seed: %v", err)
	}

	var ps []*collective.Party
	for range parties - 1 {
		party, err := collective.NewParty(p)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, party)
	}
	short := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, errs.ErrInvalid) {
			t.Fatalf("%s from %d parties of %d: %v", what, len(ps), parties, err)
		}
	}
	ekg, err := collective.NewEncapsulationKeyGen(p, seed)
	if err != nil {
		t.Fatal(err)
	}
	var es []*collective.Shares
	bkg, err := collective.NewBlockKeyGen(p, seed, 0)
	if err != nil {
		t.Fatal(err)
	}
	var bs []multiparty.EvaluationKeyGenShare
	rkg, err := collective.NewRelinKeyGen(p, seed)
	if err != nil {
		t.Fatal(err)
	}
	var r1 []multiparty.RelinearizationKeyGenShare
	gkg, err := collective.NewGaloisKeyGen(p, seed)
	if err != nil {
		t.Fatal(err)
	}
	g := p.GaloisElements(nil)[0]
	var gs []multiparty.GaloisKeyGenShare
	db := collective.NewDBShares(cp, 1)
	for _, party := range ps {
		e, err := ekg.Share(party)
		if err != nil {
			t.Fatal(err)
		}
		b, err := bkg.Share(db[0], party.Dense)
		if err != nil {
			t.Fatal(err)
		}
		_, r := rkg.Round1(party)
		gg, err := gkg.Share(party, g)
		if err != nil {
			t.Fatal(err)
		}
		es, bs, r1, gs = append(es, e), append(bs, b), append(r1, r), append(gs, gg)
	}
	_, err = ekg.Combine(es)
	short("encapsulation keys", err)
	_, err = bkg.Combine(bs)
	short("a block key", err)
	_, err = rkg.Aggregate(r1)
	short("a relinearisation round", err)
	_, err = gkg.Key(g, gs)
	short("a Galois key", err)
	other, err := gkg.Share(ps[0], p.GaloisElements(nil)[1])
	if err != nil {
		t.Fatal(err)
	}
	_, err = gkg.Key(g, append(gs, other))
	short("a Galois key with a share for another element", err)
}
