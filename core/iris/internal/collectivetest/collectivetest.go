// Package collectivetest runs a whole threshold setup of package
// collective in one process, for tests: the parameters' parties draw their
// shares, every key an iris search needs is made from them, a database is
// enrolled with public keys and the parties' EncS contributions, and the
// sums a test needs to decrypt are formed (which no real party ever
// does).
package collectivetest

import (
	"testing"

	"encmatch/core/iris/ccmm"
	"encmatch/core/iris/collective"
	"encmatch/core/iris/scoreslots"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/multiparty"
)

// Setup is the outcome of New.
type Setup struct {
	// Keys are the server's keys for the database's blocks; Keys.Secret
	// is the sum of the parties' dense shares, for the test to decrypt.
	Keys *scoreslots.Keys
	// QueryKey is the queriers' public key.
	QueryKey *ccmm.PublicKey
	// DBKey is the database blocks' public key, the enroller's.
	DBKey *ccmm.PublicKey
	// QueryShares are each party's shares of the query secrets, which it
	// keeps (its EncS contribution needs them).
	QueryShares []ccmm.Keys
	// DBSecrets are the summed database secrets, for the test to measure
	// a database's noise.
	DBSecrets ccmm.Keys
}

// New runs the setup for parameters p (p.Lit.EphemeralShares parties,
// p.CCMM.Lit.QueryShares and DBShares the same), a database of blocks blocks and the
// Galois keys of galois (besides the bootstrapping's own, as
// scoreslots.Params.GaloisElements lists them), on seed.
func New(tb testing.TB, p *scoreslots.Params, blocks int, galois []uint64, seed []byte) *Setup {
	tb.Helper()
	n := p.Lit.EphemeralShares
	if p.CCMM.Lit.QueryShares != n || p.CCMM.Lit.DBShares != n {
		tb.Fatalf("query secrets of %d shares, database secrets of %d, ephemeral secret of %d", p.CCMM.Lit.QueryShares, p.CCMM.Lit.DBShares, n)
	}
	bp := p.Bootstrap.BootstrappingParameters
	check := func(err error) {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
	}
	parties := make([]*collective.Party, n)
	queryShares, dbShares := make([]ccmm.Keys, n), make([]ccmm.Keys, n)
	for i := range parties {
		var err error
		parties[i], err = collective.NewParty(p)
		check(err)
		queryShares[i], dbShares[i] = collective.NewQueryShares(p.CCMM), collective.NewDBShares(p.CCMM, blocks)
	}

	qkg, err := collective.NewQueryKeyGen(p.CCMM, seed)
	check(err)
	qs := make([][]multiparty.PublicKeyGenShare, n)
	for i := range parties {
		qs[i], err = qkg.Share(queryShares[i])
		check(err)
	}
	out := &Setup{Keys: &scoreslots.Keys{Secret: rlwe.NewSecretKey(bp)}, QueryShares: queryShares, DBSecrets: Sum(p.CCMM.DB, dbShares)}
	out.QueryKey, err = qkg.Combine(qs)
	check(err)
	dkg, err := collective.NewDBKeyGen(p.CCMM, seed, blocks)
	check(err)
	ds := make([][]multiparty.PublicKeyGenShare, n)
	for i := range parties {
		ds[i], err = dkg.Share(dbShares[i])
		check(err)
	}
	out.DBKey, err = dkg.Combine(ds)
	check(err)

	ekg, err := collective.NewEncapsulationKeyGen(p, seed)
	check(err)
	es := make([]*collective.Shares, n)
	for i, party := range parties {
		es[i], err = ekg.Share(party)
		check(err)
	}
	out.Keys.Encapsulation, err = ekg.Combine(es)
	check(err)

	for b := range blocks {
		bkg, err := collective.NewBlockKeyGen(p, seed, b)
		check(err)
		bs := make([]multiparty.EvaluationKeyGenShare, n)
		for i, party := range parties {
			bs[i], err = bkg.Share(dbShares[i][b], party.Dense)
			check(err)
		}
		key, err := bkg.Combine(bs)
		check(err)
		out.Keys.Blocks = append(out.Keys.Blocks, key)
	}

	rkg, err := collective.NewRelinKeyGen(p, seed)
	check(err)
	ephs, r1 := make([]*rlwe.SecretKey, n), make([]multiparty.RelinearizationKeyGenShare, n)
	for i, party := range parties {
		ephs[i], r1[i] = rkg.Round1(party)
	}
	round1, err := rkg.Aggregate(r1)
	check(err)
	r2 := make([]multiparty.RelinearizationKeyGenShare, n)
	for i, party := range parties {
		r2[i] = rkg.Round2(party, ephs[i], round1)
	}
	round2, err := rkg.Aggregate(r2)
	check(err)

	gkg, err := collective.NewGaloisKeyGen(p, seed)
	check(err)
	var gks []*rlwe.GaloisKey
	for _, g := range p.GaloisElements(galois) {
		gs := make([]multiparty.GaloisKeyGenShare, n)
		for i, party := range parties {
			gs[i], err = gkg.Share(party, g)
			check(err)
		}
		key, err := gkg.Key(g, gs)
		check(err)
		gks = append(gks, key)
	}
	out.Keys.Shared = rlwe.NewMemEvaluationKeySet(rkg.Key(round1, round2), gks...)
	for _, party := range parties {
		bp.RingQP().Add(out.Keys.Secret.Value, party.Dense.Value, out.Keys.Secret.Value)
	}
	return out
}

// Enroll encrypts db with public keys only: Enc with the database key,
// EncS as the sum of every party's contribution.
func (s *Setup) Enroll(tb testing.TB, cp *ccmm.Params, db ccmm.IntMat) *ccmm.DB {
	tb.Helper()
	enc, err := cp.EncryptDBPK(s.DBKey, db)
	if err != nil {
		tb.Fatal(err)
	}
	parts := make([]*ccmm.SharedA, len(s.QueryShares))
	for i, shares := range s.QueryShares {
		if parts[i], err = cp.EncSShare(s.DBKey, enc, shares); err != nil {
			tb.Fatal(err)
		}
	}
	encS, err := cp.CombineEncS(parts)
	if err != nil {
		tb.Fatal(err)
	}
	return &ccmm.DB{Enc: enc, EncS: encS}
}

// Product enrolls db (Enroll) and encrypts q under the query public key,
// and returns their rescaled encrypted product (modulo Q, scale Delta).
func (s *Setup) Product(tb testing.TB, cp *ccmm.Params, db, q ccmm.IntMat) *ccmm.SharedA {
	tb.Helper()
	edb := s.Enroll(tb, cp, db)
	qct, err := cp.EncryptQueryPK(s.QueryKey, q)
	if err != nil {
		tb.Fatal(err)
	}
	res, err := cp.Multiply(edb, qct)
	if err != nil {
		tb.Fatal(err)
	}
	return res
}

// Sum adds the parties' shares of each secret.
func Sum(params rlwe.Parameters, shares []ccmm.Keys) ccmm.Keys {
	out := make(ccmm.Keys, len(shares[0]))
	for t := range out {
		out[t] = shares[0][t].CopyNew()
		for _, s := range shares[1:] {
			params.RingQP().Add(out[t].Value, s[t].Value, out[t].Value)
		}
	}
	return out
}
