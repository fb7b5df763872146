package collective_test

import (
	"errors"
	"math/rand/v2"
	"testing"

	"encmatch/core/base/errs"
	"encmatch/core/iris/ccmm"
	"encmatch/core/iris/collective"
	"encmatch/core/iris/internal/ccmmtest"
	"encmatch/core/iris/internal/collectivetest"

	"github.com/tuneinsight/lattigo/v6/multiparty"
)

// TestCollectiveQueryKey: three parties make the query public key with
// Lattigo's CKG; a querier encrypts with it; a database enrolled under the
// sum of the parties' query secret shares (by the test, which plays a key
// holder: TestPublicEnrollment enrolls without one) and the
// product decrypt exactly to the plaintext scores. The fresh query's and
// the product's noise are measured beside one holder's key on the same
// data: the summed secret's coefficients reach 3 and the key's error has
// three times the variance, which the bounds of parameters made for
// three parties' shares (ccmm.Literal.QueryShares) must cover.
func TestCollectiveQueryKey(t *testing.T) {
	cp, err := ccmm.NewParams(toyCCMM)
	if err != nil {
		t.Fatal(err)
	}
	lit := toyCCMM
	lit.QueryShares = parties
	cp3, err := ccmm.NewParams(lit)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := collective.NewQueryKeyGen(cp, seed); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("a collective query key for one holder's parameters: %v", err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	cols := 8
	mdb := ccmmtest.Codes(rng, cp.NDB, cp.Lit.Inner)
	mq := ccmmtest.Codes(rng, cp.Lit.Inner, cols)
	ccmmtest.Plant(mdb, mq, 5, 0, 0)
	want, err := ccmm.MulInt(mdb, mq)
	if err != nil {
		t.Fatal(err)
	}

	g, err := collective.NewQueryKeyGen(cp3, seed)
	if err != nil {
		t.Fatal(err)
	}
	var shares [][]multiparty.PublicKeyGenShare
	var secrets []ccmm.Keys
	for range parties {
		s := collective.NewQueryShares(cp3)
		sh, err := g.Share(s)
		if err != nil {
			t.Fatal(err)
		}
		secrets, shares = append(secrets, s), append(shares, sh)
	}
	if _, err := g.Share(secrets[0][:1]); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("one share for two query secrets: %v", err)
	}
	if _, err := g.Combine(shares[:parties-1]); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("two parties' shares of three combined: %v", err)
	}
	pk, err := g.Combine(shares)
	if err != nil {
		t.Fatal(err)
	}
	collective := &ccmm.Secrets{DB: ccmm.GenKeys(cp3.DB, 1), Query: collectivetest.Sum(cp3.Query, secrets)}
	single, err := cp.GenSecrets(cp.NDB)
	if err != nil {
		t.Fatal(err)
	}
	singlePK, err := cp.GenQueryPublicKey(single)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		cp   *ccmm.Params
		sk   *ccmm.Secrets
		pk   *ccmm.PublicKey
	}{{"one holder", cp, single, singlePK}, {"three parties", cp3, collective, pk}} {
		cp := c.cp
		qct, err := cp.EncryptQueryPK(c.pk, mq)
		if err != nil {
			t.Fatal(err)
		}
		fresh, err := ccmm.Noise(cp.Query, c.sk.Query, qct, mq)
		if err != nil {
			t.Fatal(err)
		}
		edb, err := cp.EncryptDB(c.sk, mdb)
		if err != nil {
			t.Fatal(err)
		}
		res, err := cp.Multiply(edb, qct)
		if err != nil {
			t.Fatal(err)
		}
		noise, err := ccmm.Noise(cp.DB, c.sk.DB, res, want)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ccmm.Decrypt(cp.DB, c.sk.DB, res)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range want.Data {
			if got.Data[i] != v {
				t.Fatalf("%s: score %d decrypts to %d, want %d", c.name, i, got.Data[i], v)
			}
		}
		t.Logf("%s: fresh query noise %.0f (bound %.0f), product noise %.0f (bound %.0f, Delta/2 %d)", c.name,
			fresh, cp.QueryFreshBound(true), noise, cp.ResultBoundFor(true), cp.Delta/2)
		if fresh > cp.QueryFreshBound(true) || noise > cp.ResultBoundFor(true) {
			t.Fatalf("%s: noise over its bound", c.name)
		}
	}
}
