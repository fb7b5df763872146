package engine

import (
	"testing"

	"encmatch/core/base/params"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
	"github.com/tuneinsight/lattigo/v6/utils/sampling"
)

// TestAccumulateProductsEqualsLattigo checks the tiled, lazy product
// against Lattigo's ciphertext product (ckks.Evaluator.MulThenAdd) applied
// product after product: the accumulators must be equal residue for
// residue (reduced, as the relinearisation expects them), on a chain that has both a prime where lazy sums fit (45 bits)
// and one where they do not (the 60-bit base prime), starting from a
// non-zero accumulator as the full-table strategies do across chunks.
func TestAccumulateProductsEqualsLattigo(t *testing.T) {
	set, err := params.New(params.Toy, params.MinKappa, 64)
	if err != nil {
		t.Fatal(err)
	}
	p := set.CKKS
	level := p.MaxLevel()
	rq := p.RingQ().AtLevel(level)
	lazy, strict := 0, 0
	for _, s := range rq.SubRings[:level+1] {
		if lazyFits(s.Modulus, 32) {
			lazy++
		} else {
			strict++
		}
	}
	if lazy == 0 || strict == 0 {
		t.Fatalf("the chain must exercise both paths: %d lazy primes, %d strict", lazy, strict)
	}
	src, _ := sampling.NewKeyedPRNG([]byte("accumulate-products"))
	uniform := ring.NewUniformSampler(src, rq)
	random := func(degree int) *rlwe.Ciphertext {
		ct := ckks.NewCiphertext(p, degree, level)
		for _, poly := range ct.Value {
			uniform.Read(poly)
		}
		return ct
	}
	eval := ckks.NewEvaluator(p, nil)
	for _, n := range []int{1, 7, 32} {
		qs, mont, ds := make([]*rlwe.Ciphertext, n), make([]*rlwe.Ciphertext, n), make([]*rlwe.Ciphertext, n)
		for i := range n {
			qs[i], ds[i] = random(1), random(1)
			mont[i] = qs[i].CopyNew()
			for _, poly := range mont[i].Value {
				rq.MForm(poly, poly)
			}
		}
		want := random(2)
		want.Scale = qs[0].Scale.Mul(ds[0].Scale) // as groupScores sets it: no rescaling of the accumulator
		got := want.CopyNew()
		for i := range n {
			if err := eval.MulThenAdd(qs[i], ds[i], want); err != nil {
				t.Fatal(err)
			}
		}
		accumulateProducts(rq, mont, ds, got)
		for k := range want.Value {
			if !want.Value[k].Equal(&got.Value[k]) { // raw residues: ring.Equal would reduce them first
				t.Fatalf("n=%d: accumulator polynomial %d differs from Lattigo's product", n, k)
			}
		}
	}
}

// TestLazyFits checks the overflow bound at its edges.
func TestLazyFits(t *testing.T) {
	for _, c := range []struct {
		q    uint64
		n    int
		want bool
	}{
		{1 << 45, 32, true},
		{1 << 45, 1 << 15, true},
		{1 << 60, 3, true},  // 13 * 2^60 < 2^64
		{1 << 60, 4, false}, // 17 * 2^60 > 2^64
		{1 << 60, 32, false},
		{(1 << 64) / 29, 7, true}, // 29 * floor(2^64/29) < 2^64
		{(1<<64)/29 + 1, 7, false},
	} {
		if got := lazyFits(c.q, c.n); got != c.want {
			t.Errorf("lazyFits(%d, %d) = %v, want %v", c.q, c.n, got, c.want)
		}
	}
}
