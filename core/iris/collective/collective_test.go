package collective

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"encmatch/core/base/errs"
	"encmatch/core/iris/ccmm"
	"encmatch/core/iris/internal/ccmmtest"
	"encmatch/core/iris/scoreslots"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/multiparty"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
	"github.com/tuneinsight/lattigo/v6/utils/sampling"
)

// toyCCMM is an INSECURE CCMM set small enough for a test: database ring
// 2^10, query ring 2^9, 1,024 positions.
var toyCCMM = ccmm.Literal{LogNDB: 10, LogNQ: 9, LogQ: []int{20, 20, 20}, LogK: []int{20, 20, 20}, LogScale: 18, Inner: 1024}

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
// parties through Lattigo's multiparty protocols: the query public key
// (QueryKeyGen), the database block's key into the bootstrapping ring
// (BlockKeyGen), the relinearisation and Galois keys of the parties'
// dense shares, and the encapsulation keys, whose ephemeral secret no
// party holds. Every slot must hold its score / 2^ScoreBits at the
// documented position. The test adds the shares itself only to play the
// enroller (the database is encrypted under the summed database and query
// secrets: an enrollment without them is later work of issue 34) and to
// decrypt.
func TestCollectiveHalfBootstrap(t *testing.T) {
	lit := toyCCMM
	lit.QueryShares = parties
	cp, err := ccmm.NewParams(lit)
	if err != nil {
		t.Fatal(err)
	}
	p, err := scoreslots.NewParams(cp, toyThreshold)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("failure bounds: 2^%.1f per bootstrap, 2^%.1f per key generation", p.EncapsulationFailure(), p.EphemeralKeyRisk())
	bp := p.Bootstrap.BootstrappingParameters

	var ps []*Party
	var queryShares, dbShares []ccmm.Keys
	for range parties {
		party, err := NewParty(p)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, party)
		queryShares = append(queryShares, NewQueryShares(cp))
		dbShares = append(dbShares, NewDBShares(cp, 1))
	}
	enc, err := NewEncapsulationKeyGen(p, seed)
	if err != nil {
		t.Fatal(err)
	}
	qkg, err := NewQueryKeyGen(cp, seed)
	if err != nil {
		t.Fatal(err)
	}
	bkg, err := NewBlockKeyGen(p, seed, 0)
	if err != nil {
		t.Fatal(err)
	}
	var shares []*Shares
	var qShares [][]multiparty.PublicKeyGenShare
	var bShares []multiparty.EvaluationKeyGenShare
	for i, party := range ps {
		s, err := enc.Share(party)
		if err != nil {
			t.Fatal(err)
		}
		q, err := qkg.Share(queryShares[i])
		if err != nil {
			t.Fatal(err)
		}
		b, err := bkg.Share(dbShares[i][0], party.Dense)
		if err != nil {
			t.Fatal(err)
		}
		shares, qShares, bShares = append(shares, s), append(qShares, q), append(bShares, b)
	}
	if _, err := enc.Combine(shares[:parties-1]); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("two parties' shares of three combined: %v", err)
	}
	if _, err := bkg.Combine(bShares[:parties-1]); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("two parties' block key shares of three combined: %v", err)
	}
	encapsulation, err := enc.Combine(shares)
	if err != nil {
		t.Fatal(err)
	}
	pk, err := qkg.Combine(qShares)
	if err != nil {
		t.Fatal(err)
	}
	blockKey, err := bkg.Combine(bShares)
	if err != nil {
		t.Fatal(err)
	}

	secret := rlwe.NewSecretKey(bp)
	for _, party := range ps {
		bp.RingQP().Add(secret.Value, party.Dense.Value, secret.Value)
	}
	keys := &scoreslots.Keys{Shared: collectiveKeys(t, bp, ps, p.GaloisElements(nil)), Encapsulation: encapsulation,
		Blocks: []*rlwe.EvaluationKey{blockKey}, Secret: secret}

	rng := rand.New(rand.NewPCG(3, 4))
	cols := 8
	mdb := ccmmtest.Codes(rng, cp.NDB, cp.Lit.Inner)
	mq := ccmmtest.Codes(rng, cp.Lit.Inner, cols)
	ccmmtest.Plant(mdb, mq, 5, 0, 0)
	want, err := ccmm.MulInt(mdb, mq)
	if err != nil {
		t.Fatal(err)
	}
	enroller := &ccmm.Secrets{DB: sum(cp.DB, dbShares), Query: sum(cp.Query, queryShares)}
	edb, err := cp.EncryptDB(enroller, mdb)
	if err != nil {
		t.Fatal(err)
	}
	qct, err := cp.EncryptQueryPK(pk, mq)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cp.Multiply(edb, qct)
	if err != nil {
		t.Fatal(err)
	}
	lifted, err := p.Lift(res, 0)
	if err != nil {
		t.Fatal(err)
	}
	evals, err := p.NewEvaluators(keys)
	if err != nil {
		t.Fatal(err)
	}
	sets, err := p.ToSlots(evals[:1], [][]*rlwe.Ciphertext{lifted})
	if err != nil {
		t.Fatal(err)
	}
	unit := math.Ldexp(1, -p.Lit.ScoreBits)
	worst, seen := 0.0, map[[2]int]bool{}
	dec, ecd := rlwe.NewDecryptor(bp, secret), ckks.NewEncoder(bp)
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

// sum adds the parties' shares of each secret (the test's enroller).
func sum(params rlwe.Parameters, shares []ccmm.Keys) ccmm.Keys {
	out := make(ccmm.Keys, len(shares[0]))
	for t := range out {
		out[t] = shares[0][t].CopyNew()
		for _, s := range shares[1:] {
			params.RingQP().Add(out[t].Value, s[t].Value, out[t].Value)
		}
	}
	return out
}

// collectiveKeys makes the relinearisation key and the Galois keys of
// galois with Lattigo's multiparty protocols from the parties' dense
// shares (what core/threshold's setup rounds run for face keys).
func collectiveKeys(t *testing.T, bp ckks.Parameters, ps []*Party, galois []uint64) *rlwe.MemEvaluationKeySet {
	t.Helper()
	crs := func(label string) multiparty.CRS {
		key := sha256.Sum256(append(append([]byte(nil), seed...), label...))
		prng, err := sampling.NewKeyedPRNG(key[:])
		if err != nil {
			t.Fatal(err)
		}
		return prng
	}
	rkg := multiparty.NewRelinearizationKeyGenProtocol(bp)
	rcrp := rkg.SampleCRP(crs("rkg"))
	ephs := make([]*rlwe.SecretKey, len(ps))
	_, r1, r2 := rkg.AllocateShare()
	round1 := make([]multiparty.RelinearizationKeyGenShare, len(ps))
	for i, party := range ps {
		ephs[i], round1[i], _ = rkg.AllocateShare()
		rkg.GenShareRoundOne(party.Dense, rcrp, ephs[i], &round1[i])
		rkg.AggregateShares(r1, round1[i], &r1)
	}
	for i, party := range ps {
		_, _, share := rkg.AllocateShare()
		rkg.GenShareRoundTwo(ephs[i], party.Dense, r1, &share)
		rkg.AggregateShares(r2, share, &r2)
	}
	rlk := rlwe.NewRelinearizationKey(bp)
	rkg.GenRelinearizationKey(r1, r2, rlk)

	gkg := multiparty.NewGaloisKeyGenProtocol(bp)
	var gks []*rlwe.GaloisKey
	for _, g := range galois {
		crp := gkg.SampleCRP(crs(fmt.Sprintf("gkg-%d", g))) // one a per key: a shared a would open sigma_1(s) - sigma_2(s)
		var sum multiparty.GaloisKeyGenShare
		for i, party := range ps {
			share := gkg.AllocateShare()
			if err := gkg.GenShare(party.Dense, g, crp, &share); err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				sum = share
			} else if err := gkg.AggregateShares(sum, share, &sum); err != nil {
				t.Fatal(err)
			}
		}
		gk := rlwe.NewGaloisKey(bp)
		if err := gkg.GenGaloisKey(sum, crp, gk); err != nil {
			t.Fatal(err)
		}
		gks = append(gks, gk)
	}
	return rlwe.NewMemEvaluationKeySet(rlk, gks...)
}

// TestRefusals: one holder's parameters have nothing to make
// collectively, and a short seed is refused.
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
	if _, err := NewParty(p); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("a party for one holder's parameters: %v", err)
	}
	if p, err = scoreslots.NewParams(cp, toyThreshold); err != nil {
		t.Fatal(err)
	}
	if _, err := NewEncapsulationKeyGen(p, seed[:8]); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("an 8-byte seed: %v", err)
	}
}
