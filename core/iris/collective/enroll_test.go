package collective_test

import (
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"testing"

	"encmatch/core/base/errs"
	"encmatch/core/iris/ccmm"
	"encmatch/core/iris/collective"
	"encmatch/core/iris/internal/ccmmtest"
	"encmatch/core/iris/internal/collectivetest"

	"github.com/tuneinsight/lattigo/v6/multiparty"
)

// publicSetup is what three parties publish for an enrollment without a
// key holder, and what they keep.
type publicSetup struct {
	dbKey, queryKey       *ccmm.PublicKey
	dbShares, queryShares []ccmm.Keys // each party's, kept by it
}

// newPublicSetup runs the two public-key protocols (database blocks and
// query secrets) for parties parties of cp.
func newPublicSetup(t *testing.T, cp *ccmm.Params, blocks int) *publicSetup {
	t.Helper()
	dkg, err := collective.NewDBKeyGen(cp, seed, blocks)
	if err != nil {
		t.Fatal(err)
	}
	qkg, err := collective.NewQueryKeyGen(cp, seed)
	if err != nil {
		t.Fatal(err)
	}
	s := &publicSetup{}
	var ds, qs [][]multiparty.PublicKeyGenShare
	for range parties {
		db, q := collective.NewDBShares(cp, blocks), collective.NewQueryShares(cp)
		d, err := dkg.Share(db)
		if err != nil {
			t.Fatal(err)
		}
		e, err := qkg.Share(q)
		if err != nil {
			t.Fatal(err)
		}
		s.dbShares, s.queryShares = append(s.dbShares, db), append(s.queryShares, q)
		ds, qs = append(ds, d), append(qs, e)
	}
	if s.dbKey, err = dkg.Combine(ds); err != nil {
		t.Fatal(err)
	}
	if s.queryKey, err = qkg.Combine(qs); err != nil {
		t.Fatal(err)
	}
	return s
}

// encNoise is ct's noise against the message want under the database
// secrets keys.
func encNoise(t *testing.T, cp *ccmm.Params, keys ccmm.Keys, ct *ccmm.SharedA, want ccmm.IntMat) float64 {
	t.Helper()
	noise, err := ccmm.Noise(cp.DB, keys, ct, want)
	if err != nil {
		t.Fatal(err)
	}
	return noise
}

// TestPublicEnrollment: three parties make the public keys of the
// database blocks' and the query secrets; an enroller holding only the
// database key encrypts Enc = Enc(K M) (two blocks on one shared a), each
// party returns its EncS contribution (Enc times its query-secret shares,
// re-randomised by its own encryption of zero), and their sum is EncS. No
// party, and not the enroller, ever holds a database or query secret.
// Against the plaintext under the summed secrets (which only the test
// forms): Enc's and EncS's noise within their bounds; a query encrypted
// with the query public key times this database decrypts exactly to the
// plaintext scores, its noise within ResultBound. A contribution left out
// is refused; one made with another party's shares gives an EncS that
// decrypts wrong; a contribution is the bare product (A1 S_q,i, B1 S_q,i)
// plus an encryption of zero, which hides the bare a-part.
func TestPublicEnrollment(t *testing.T) {
	lit := toyCollectiveCCMM
	cp, err := ccmm.NewParams(lit)
	if err != nil {
		t.Fatal(err)
	}
	one, err := ccmm.NewParams(toyCCMM)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := collective.NewDBKeyGen(one, seed, 1); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("a collective database key for one holder's parameters: %v", err)
	}
	const blocks = 2
	s := newPublicSetup(t, cp, blocks)
	dbSum, qSum := collectivetest.Sum(cp.DB, s.dbShares), collectivetest.Sum(cp.Query, s.queryShares)

	rng := rand.New(rand.NewPCG(7, 8))
	cols := 8
	mdb := ccmmtest.Codes(rng, blocks*cp.NDB, cp.Lit.Inner)
	mq := ccmmtest.Codes(rng, cp.Lit.Inner, cols)
	ccmmtest.Plant(mdb, mq, 5, 0, 0)
	ccmmtest.Plant(mdb, mq, cp.NDB+9, 3, 0)
	want, err := ccmm.MulInt(mdb, mq)
	if err != nil {
		t.Fatal(err)
	}

	enc, err := cp.EncryptDBPK(s.dbKey, mdb)
	if err != nil {
		t.Fatal(err)
	}
	var parts []*ccmm.SharedA
	for _, q := range s.queryShares {
		part, err := cp.EncSShare(s.dbKey, enc, q)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, part)
	}
	if _, err := cp.CombineEncS(parts[:parties-1]); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("two contributions of three combined: %v", err)
	}
	encS, err := cp.CombineEncS(parts)
	if err != nil {
		t.Fatal(err)
	}
	msq := mulSecret(cp, qSum, mdb)
	e1, e2 := encNoise(t, cp, dbSum, enc, mdb), encNoise(t, cp, dbSum, encS, msq)
	t.Logf("Enc noise %.0f (bound %.0f), EncS noise %.0f (bound %.0f)", e1, cp.EncBound(), e2, cp.EncSBound())
	if e1 > cp.EncBound() || e2 > cp.EncSBound() {
		t.Fatal("database noise over its bound")
	}

	// The contribution is the bare product A1 S_q,0, B1 S_q,0 (computed
	// here by GEMMs with S_q,0's negacyclic matrix; the scale only enters
	// MulPlain's range check) plus an encryption of zero, whose a-part
	// hides the bare product's.
	unscaled := *enc
	unscaled.Scale = big.NewInt(1)
	bare, err := ccmm.MulPlain(&unscaled, negacyclic(cp, s.queryShares[0]), 1)
	if err != nil {
		t.Fatal(err)
	}
	zero := &ccmm.SharedA{LogN: enc.LogN, Rows: enc.Rows, Cols: cp.NQ, Moduli: enc.Moduli, Scale: enc.Scale}
	same := 0
	for i, q := range enc.Moduli {
		zero.A = append(zero.A, sub(parts[0].A[i], bare.A[i], q))
		zero.B = append(zero.B, sub(parts[0].B[i], bare.B[i], q))
		for _, v := range zero.A[i].Data {
			if v == 0 {
				same++
			}
		}
	}
	if same > len(zero.A[0].Data)/100 {
		t.Fatalf("%d a-part residues of a contribution equal the bare product's", same)
	}
	if n := encNoise(t, cp, dbSum, zero, ccmm.NewIntMat(zero.Rows, zero.Cols)); n > cp.EncBound() {
		t.Fatalf("a contribution minus the bare product: noise %.0f against zero, over Enc's bound %.0f", n, cp.EncBound())
	}

	qct, err := cp.EncryptQueryPK(s.queryKey, mq)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cp.Multiply(&ccmm.DB{Enc: enc, EncS: encS}, qct)
	if err != nil {
		t.Fatal(err)
	}
	noise := encNoise(t, cp, dbSum, res, want)
	got, err := ccmm.Decrypt(cp.DB, dbSum, res)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range want.Data {
		if got.Data[i] != v {
			t.Fatalf("score %d decrypts to %d, want %d", i, got.Data[i], v)
		}
	}
	t.Logf("product noise %.0f (bound %.0f, Delta/2 %d)", noise, cp.ResultBound(), cp.Delta/2)
	if noise > cp.ResultBound() {
		t.Fatal("product noise over its bound")
	}

	// A party that uses another's shares: EncS no longer encrypts K M S_q.
	wrong, err := cp.EncSShare(s.dbKey, enc, s.queryShares[1])
	if err != nil {
		t.Fatal(err)
	}
	bad, err := cp.CombineEncS([]*ccmm.SharedA{wrong, parts[1], parts[2]})
	if err != nil {
		t.Fatal(err)
	}
	if n := encNoise(t, cp, dbSum, bad, msq); n <= cp.EncSBound() {
		t.Fatalf("an EncS with one party's shares twice is within the bound (noise %.0f)", n)
	}
}

// sub returns x - y modulo q, centered.
func sub(x, y ccmm.Mat, q uint64) ccmm.Mat {
	out := ccmm.NewMat(x.Rows, x.Cols)
	for k := range x.Data {
		d := (int64(x.Data[k]) - int64(y.Data[k])) % int64(q)
		if d > int64(q/2) {
			d -= int64(q)
		} else if d < -int64(q/2) {
			d += int64(q)
		}
		out.Data[k] = int32(d)
	}
	return out
}

// mulSecret is M S_q (cp.MulSecret) as an IntMat, the message EncS
// encrypts.
func mulSecret(cp *ccmm.Params, keys ccmm.Keys, m ccmm.IntMat) ccmm.IntMat {
	ms := cp.MulSecret(keys, m)
	out := ccmm.NewIntMat(ms.Rows, ms.Cols)
	for i, v := range ms.Data {
		out.Data[i] = int64(v)
	}
	return out
}

// negacyclic is the plaintext matrix S (Inner x N_q) of the query secrets
// keys: block t is the negacyclic matrix of s_t(X^-1), the map MulSecret
// applies, so that M S = MulSecret(keys, M).
func negacyclic(cp *ccmm.Params, keys ccmm.Keys) ccmm.IntMat {
	n := cp.NQ
	s := ccmm.NewIntMat(cp.Lit.Inner, n)
	for l := 0; l < cp.Lit.Inner; l++ {
		e := ccmm.NewIntMat(1, cp.Lit.Inner)
		e.Data[l] = 1
		row := cp.MulSecret(keys, e) // e_l S: row l of S
		for k := range n {
			s.Data[l*n+k] = int64(row.Data[k])
		}
	}
	return s
}

// TestPublicEnrollmentNoiseAtIrisRings measures Enc's and EncS's noise at
// the iris rings' dimensions (database ring 2^14, query ring 2^13, 2^14
// code positions, one block of 2^14 codes; three parties) against their
// bounds, with one prime in each of Q and K: the noise does not depend on
// the primes, and the six of ccmm.IrisCollective would need about 50 GB
// for these matrices in memory (with two: 16.8 GB peak, 3 minutes on 2
// cores). Slow (ENCMATCH_CCMM_SLOW=1).
func TestPublicEnrollmentNoiseAtIrisRings(t *testing.T) {
	if os.Getenv("ENCMATCH_CCMM_SLOW") == "" {
		t.Skip("slow: set ENCMATCH_CCMM_SLOW=1")
	}
	lit := ccmm.Literal{LogNDB: 14, LogNQ: 13, LogQ: []int{30}, LogK: []int{30}, LogScale: 8, Inner: 1 << 14,
		QueryShares: parties, DBShares: parties, Approximate: true}
	cp, err := ccmm.NewParams(lit)
	if err != nil {
		t.Fatal(err)
	}
	s := newPublicSetup(t, cp, 1)
	dbSum, qSum := collectivetest.Sum(cp.DB, s.dbShares), collectivetest.Sum(cp.Query, s.queryShares)
	rng := rand.New(rand.NewPCG(9, 10))
	mdb := ccmmtest.Codes(rng, cp.NDB, cp.Lit.Inner)
	enc, err := cp.EncryptDBPK(s.dbKey, mdb)
	if err != nil {
		t.Fatal(err)
	}
	e1 := encNoise(t, cp, dbSum, enc, mdb)
	var parts []*ccmm.SharedA
	for _, q := range s.queryShares {
		part, err := cp.EncSShare(s.dbKey, enc, q)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, part)
	}
	encS, err := cp.CombineEncS(parts)
	if err != nil {
		t.Fatal(err)
	}
	msq := mulSecret(cp, qSum, mdb)
	e2 := encNoise(t, cp, dbSum, encS, msq)
	t.Logf("iris rings, three parties: Enc noise %.0f = 2^%.1f (bound 2^%.1f), EncS noise %.0f = 2^%.1f (bound 2^%.1f)",
		e1, math.Log2(e1), math.Log2(cp.EncBound()), e2, math.Log2(e2), math.Log2(cp.EncSBound()))
	if e1 > cp.EncBound() || e2 > cp.EncSBound() {
		t.Fatal("database noise over its bound")
	}
}
