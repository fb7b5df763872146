package ccmm

import (
	"errors"
	"math"
	"testing"

	"encmatch/core/base/errs"
)

// TestQueryShares: query secrets made of n parties' shares widen the
// public-key query's noise variance n-fold (its bound by sqrt(n) once the
// key's terms dominate), the product's bound with it; `IrisBootstrap`
// holds three parties' shares (2^19.2 below Delta/2 = 2^21) and refuses
// 64 (its bound reaches Delta/2); a count outside [1, 256] is refused.
func TestQueryShares(t *testing.T) {
	one, err := NewParams(IrisBootstrap)
	if err != nil {
		t.Fatal(err)
	}
	lit := IrisBootstrap
	lit.QueryShares = 3
	three, err := NewParams(lit)
	if err != nil {
		t.Fatal(err)
	}
	if one.Lit.QueryShares != 1 {
		t.Fatalf("QueryShares defaults to %d, want 1", one.Lit.QueryShares)
	}
	ratio := three.QueryFreshBound(true) / one.QueryFreshBound(true)
	if math.Abs(ratio-math.Sqrt((1+4*3*float64(one.NQ)/3)/(1+4*float64(one.NQ)/3))) > 1e-9 {
		t.Fatalf("fresh query bound grew %.4f times for three shares", ratio)
	}
	if b := three.ResultBoundFor(true); !(b > one.ResultBoundFor(true) && b < float64(three.Delta)/2) {
		t.Fatalf("three shares: result bound 2^%.2f (one holder 2^%.2f, Delta/2 2^%.1f)", math.Log2(b), math.Log2(one.ResultBoundFor(true)), math.Log2(float64(three.Delta)/2))
	}
	t.Logf("result bound: one holder 2^%.2f, three shares 2^%.2f, Delta/2 2^%.1f", math.Log2(one.ResultBoundFor(true)), math.Log2(three.ResultBoundFor(true)), math.Log2(float64(three.Delta)/2))
	lit.QueryShares = 64
	if _, err := NewParams(lit); !errors.Is(err, ErrModulus) {
		t.Fatalf("64 parties' shares at IrisBootstrap: %v, want ErrModulus", err)
	}
	for _, n := range []int{-1, 257} {
		lit.QueryShares = n
		if _, err := NewParams(lit); !errors.Is(err, errs.ErrInvalid) {
			t.Fatalf("QueryShares %d: %v, want ErrInvalid", n, err)
		}
	}
}

// TestDBShares: a database enrolled with public keys by three parties
// (DBShares) has a larger noise, which IrisBootstrap's K cannot divide
// below Delta/2 and IrisCollective's can; the secrets' sum, with
// coefficients up to 3, is accepted as a secret of another ring by
// parameters made for it and refused by one holder's; a count outside
// [0, 256] is refused.
func TestDBShares(t *testing.T) {
	lit := IrisBootstrap
	lit.QueryShares, lit.DBShares = 3, 3
	if _, err := NewParams(lit); !errors.Is(err, ErrModulus) {
		t.Fatalf("three parties' public enrollment at IrisBootstrap: %v, want ErrModulus", err)
	}
	cp, err := NewParams(IrisCollective)
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.Secure(); err != nil {
		t.Fatal(err)
	}
	b := cp.ResultBound()
	t.Logf("IrisCollective: log Q*K %.1f, Enc bound 2^%.2f, EncS bound 2^%.2f, result bound 2^%.2f (Delta/2 2^%.0f)",
		cp.LogQ()+bitLen(cp.ModulusK()), math.Log2(cp.EncBound()), math.Log2(cp.EncSBound()), math.Log2(b), math.Log2(float64(cp.Delta)/2))
	if !(b < float64(cp.Delta)/2) || !(cp.EncSBound() > cp.EncBound()) {
		t.Fatalf("result bound 2^%.2f, Enc 2^%.2f, EncS 2^%.2f", math.Log2(b), math.Log2(cp.EncBound()), math.Log2(cp.EncSBound()))
	}
	toy := Toy
	toy.DBShares, toy.Approximate = 3, true // only the secret's range is tested here
	tp, err := NewParams(toy)
	if err != nil {
		t.Fatal(err)
	}
	one, err := NewParams(Toy)
	if err != nil {
		t.Fatal(err)
	}
	sum := GenKeys(tp.DB, 1)[0]
	for range 2 {
		tp.DB.RingQP().Add(sum.Value, GenKeys(tp.DB, 1)[0].Value, sum.Value)
	}
	if _, err := tp.SecretAs(sum, tp.DB); err != nil {
		t.Fatalf("three shares' sum with DBShares 3: %v", err)
	}
	if _, err := one.SecretAs(sum, one.DB); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("three shares' sum as one holder's secret: %v", err)
	}
	for _, n := range []int{-1, 257} {
		lit.DBShares = n
		if _, err := NewParams(lit); !errors.Is(err, errs.ErrInvalid) {
			t.Fatalf("DBShares %d: %v, want ErrInvalid", n, err)
		}
	}
}
