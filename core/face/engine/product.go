package engine

import (
	"math/bits"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"

	"encmatch/core/kernels"
)

// productTile is the number of coefficients of one prime that
// accumulateProducts processes across a whole chunk before it moves on:
// the accumulator's three tiles (12 KB) stay in the core's first-level
// cache while the chunk's query and diagonal tiles stream through, where a
// product at a time would read and write all three accumulator
// polynomials (3 x 3.9 MB at N = 2^15, 15 primes) from memory per product.
// 512 was the fastest of 512, 2048 and 8192 measured at the default preset.
const productTile = 512

// accumulateProducts adds sum_i qs[i] (x) ds[i] (the tensor products of
// Lattigo's ciphertext product, qs already in the Montgomery domain) to
// the degree-2 accumulator acc, whose coefficients must be reduced (below
// their prime). It computes the same residues as Lattigo's
// MulCoeffsMontgomeryThenAdd applied product after product, in another
// order: one prime and one tile of coefficients at a time across all the
// products, and, for every prime small enough that the unreduced sum
// cannot overflow 64 bits, with lazy (unreduced) Montgomery products and a
// single reduction per tile.
//
// Where package kernels has a vector accumulator for the prime
// (kernels.MulAddTensor), it does one prime in a single pass instead.
func accumulateProducts(rq *ring.Ring, qs, ds []*rlwe.Ciphertext, acc *rlwe.Ciphertext) {
	n := len(qs)
	q0s, q1s, d0s, d1s := make([][]uint64, n), make([][]uint64, n), make([][]uint64, n), make([][]uint64, n)
	for j, sub := range rq.SubRings[:rq.Level()+1] {
		a0, a1, a2 := acc.Value[0].Coeffs[j], acc.Value[1].Coeffs[j], acc.Value[2].Coeffs[j]
		if kernels.TakesTensor(sub.Modulus) {
			for i := range n {
				q0s[i], q1s[i] = qs[i].Value[0].Coeffs[j], qs[i].Value[1].Coeffs[j]
				d0s[i], d1s[i] = ds[i].Value[0].Coeffs[j], ds[i].Value[1].Coeffs[j]
			}
			if kernels.MulAddTensor(q0s, q1s, d0s, d1s, a0, a1, a2, sub.Modulus) {
				continue
			}
		}
		lazy := lazyFits(sub.Modulus, n)
		for t := 0; t < len(a0); t += productTile {
			e := min(t+productTile, len(a0))
			t0, t1, t2 := a0[t:e], a1[t:e], a2[t:e]
			for i := range n {
				q0, q1 := qs[i].Value[0].Coeffs[j][t:e], qs[i].Value[1].Coeffs[j][t:e]
				d0, d1 := ds[i].Value[0].Coeffs[j][t:e], ds[i].Value[1].Coeffs[j][t:e]
				if lazy {
					sub.MulCoeffsMontgomeryLazyThenAddLazy(q0, d0, t0)
					sub.MulCoeffsMontgomeryLazyThenAddLazy(q0, d1, t1)
					sub.MulCoeffsMontgomeryLazyThenAddLazy(q1, d0, t1)
					sub.MulCoeffsMontgomeryLazyThenAddLazy(q1, d1, t2)
				} else {
					sub.MulCoeffsMontgomeryThenAdd(q0, d0, t0)
					sub.MulCoeffsMontgomeryThenAdd(q0, d1, t1)
					sub.MulCoeffsMontgomeryThenAdd(q1, d0, t1)
					sub.MulCoeffsMontgomeryThenAdd(q1, d1, t2)
				}
			}
			if lazy {
				sub.Reduce(t0, t0)
				sub.Reduce(t1, t1)
				sub.Reduce(t2, t2)
			}
		}
	}
}

// lazyFits reports whether n lazy products can be added to a reduced
// accumulator coefficient modulo q without overflowing 64 bits: each lazy
// Montgomery product is below 2q and the middle coefficient receives two
// per product, so the sum stays below q (1 + 4n).
func lazyFits(q uint64, n int) bool {
	hi, _ := bits.Mul64(q, uint64(1+4*n))
	return hi == 0
}
