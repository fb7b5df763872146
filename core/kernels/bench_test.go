package kernels_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tuneinsight/lattigo/v6/ring"

	"encmatch/core/kernels"
)

// benchRing is N = 2^15 with one prime of logQ bits.
func benchRing(b *testing.B, logQ int) *ring.Ring {
	g := ring.NewNTTFriendlyPrimesGenerator(uint64(logQ), 1<<16)
	q, err := g.NextDownstreamPrime()
	if err != nil {
		b.Fatal(err)
	}
	r, err := ring.NewRing(1<<15, []uint64{q})
	if err != nil {
		b.Fatal(err)
	}
	return r
}

func randomPoly(r *ring.Ring, seed uint64) ring.Poly {
	rng := rand.New(rand.NewPCG(seed, seed))
	p := r.NewPoly()
	for i := range p.Coeffs[0] {
		p.Coeffs[0][i] = rng.Uint64N(r.SubRings[0].Modulus)
	}
	return p
}

// eachSet runs f as a sub-benchmark per kernel set this CPU runs, so that
// one run compares them side by side.
func eachSet(b *testing.B, f func(b *testing.B)) {
	for _, s := range kernels.Available() {
		b.Run(string(s), func(b *testing.B) {
			prev := kernels.Active()
			if err := kernels.Use(s); err != nil {
				b.Fatal(err)
			}
			defer func() { _ = kernels.Use(prev) }()
			f(b)
		})
	}
}

// BenchmarkNTTRoundTrip is a forward and an inverse NTT, N = 2^15, one
// prime (issue 36's first target, at 45 bits; the iris presets' levels
// have 20 to 39 bits; 55 and 60 bits run the IFMA set's 64-bit
// butterflies, as the base and bootstrapping primes do).
func BenchmarkNTTRoundTrip(b *testing.B) {
	for _, logQ := range []int{20, 36, 45, 50, 55, 60} {
		b.Run(fmt.Sprintf("logQ=%d", logQ), func(b *testing.B) {
			r := benchRing(b, logQ)
			p := randomPoly(r, 1)
			eachSet(b, func(b *testing.B) {
				for b.Loop() {
					r.NTT(p, p)
					r.INTT(p, p)
				}
			})
		})
	}
}

// BenchmarkMulCoeffsMontgomeryLazyThenAddLazy is the element-wise
// multiply-add of key switching and of the face engine's products, 2^15
// coefficients modulo a 45-bit prime.
func BenchmarkMulCoeffsMontgomeryLazyThenAddLazy(b *testing.B) {
	r := benchRing(b, 45)
	x, y, z := randomPoly(r, 1), randomPoly(r, 2), r.NewPoly()
	eachSet(b, func(b *testing.B) {
		calls := 0
		for b.Loop() {
			if calls++; calls%4096 == 0 {
				clear(z.Coeffs[0]) // z grows by < 2q per call
			}
			r.MulCoeffsMontgomeryLazyThenAddLazy(x, y, z)
		}
	})
}

// BenchmarkMulCoeffsMontgomeryThenAdd is the canonical multiply-add.
func BenchmarkMulCoeffsMontgomeryThenAdd(b *testing.B) {
	r := benchRing(b, 45)
	x, y, z := randomPoly(r, 1), randomPoly(r, 2), r.NewPoly()
	eachSet(b, func(b *testing.B) {
		for b.Loop() {
			r.MulCoeffsMontgomeryThenAdd(x, y, z)
		}
	})
}
