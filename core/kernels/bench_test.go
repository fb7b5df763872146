package kernels_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
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
// coefficients modulo a 45-bit prime (IFMA lanes) and a 60-bit one (64-bit
// words: the face presets' base prime, the bootstrap's EvalMod levels).
func BenchmarkMulCoeffsMontgomeryLazyThenAddLazy(b *testing.B) {
	for _, logQ := range []int{45, 60} {
		b.Run(fmt.Sprintf("logQ=%d", logQ), func(b *testing.B) {
			r := benchRing(b, logQ)
			x, y, z := randomPoly(r, 1), randomPoly(r, 2), r.NewPoly()
			eachSet(b, func(b *testing.B) {
				calls, every := 0, 1<<(62-logQ) // z grows by < 2q per call
				for b.Loop() {
					if calls++; calls%every == 0 {
						clear(z.Coeffs[0])
					}
					r.MulCoeffsMontgomeryLazyThenAddLazy(x, y, z)
				}
			})
		})
	}
}

// BenchmarkMulCoeffsMontgomeryThenAdd is the canonical multiply-add, at the
// same primes.
func BenchmarkMulCoeffsMontgomeryThenAdd(b *testing.B) {
	for _, logQ := range []int{45, 60} {
		b.Run(fmt.Sprintf("logQ=%d", logQ), func(b *testing.B) {
			r := benchRing(b, logQ)
			x, y, z := randomPoly(r, 1), randomPoly(r, 2), r.NewPoly()
			eachSet(b, func(b *testing.B) {
				for b.Loop() {
					r.MulCoeffsMontgomeryThenAdd(x, y, z)
				}
			})
		})
	}
}

// BenchmarkBasisExtension is Lattigo's fast basis extension at the
// presets' sizes, N = 2^15: the face default preset's key-switching
// decomposition of a top-level ciphertext (every digit of
// DecomposeAndSplit) and its ModDown's extension from P to Q
// (ModUpPtoQ), and the iris bootstrapping ring's (2^16, its top 20
// primes, every digit).
func BenchmarkBasisExtension(b *testing.B) {
	var face, iris chain
	for _, c := range presetChains(b) {
		switch c.name {
		case "face default kappa 13 payload false":
			face = c
		case "iris fold bootstrap":
			iris = c
		}
	}
	if face.q == nil || iris.q == nil {
		b.Fatal("a preset chain is missing")
	}
	for _, c := range []struct {
		name string
		q, p []uint64
		logN int
	}{{"face-decompose", face.q, face.p, 15}, {"iris-decompose", iris.q[:min(len(iris.q), 20)], iris.p, 16}} {
		rQ, err := ring.NewRing(1<<c.logN, c.q)
		if err != nil {
			b.Fatal(err)
		}
		rP, err := ring.NewRing(1<<c.logN, c.p)
		if err != nil {
			b.Fatal(err)
		}
		dec := ring.NewDecomposer(rQ, rP)
		be := ring.NewBasisExtender(rQ, rP)
		rng := rand.New(rand.NewPCG(7, 8))
		in := rQ.NewPoly()
		fill(in, c.q, "random", rng)
		pP := rP.NewPoly()
		fill(pP, c.p, "random", rng)
		dQ, dP, toQ := rQ.NewPoly(), rP.NewPoly(), rQ.NewPoly()
		nbPi := len(c.p)
		b.Run(c.name, func(b *testing.B) {
			eachSet(b, func(b *testing.B) {
				for b.Loop() {
					for digit := 0; digit*nbPi <= rQ.MaxLevel(); digit++ {
						dec.DecomposeAndSplit(rQ.MaxLevel(), rP.MaxLevel(), nbPi, digit, in, dQ, dP)
					}
				}
			})
		})
		b.Run(c.name[:strings.Index(c.name, "-")]+"-moddown", func(b *testing.B) {
			eachSet(b, func(b *testing.B) {
				for b.Loop() {
					be.ModUpPtoQ(rP.MaxLevel(), rQ.MaxLevel(), pP, toQ)
				}
			})
		})
	}
}

// BenchmarkModLoops is Lattigo's Barrett reduction (Reduce, after key
// switching's lazy sums) and the subtraction of a scalar (SubScalar, after
// each basis extension), 2^15 coefficients modulo a 45- and a 60-bit
// prime.
func BenchmarkModLoops(b *testing.B) {
	for _, logQ := range []int{45, 60} {
		r := benchRing(b, logQ)
		sub := r.SubRings[0]
		x, z := randomPoly(r, 1), r.NewPoly()
		b.Run(fmt.Sprintf("Reduce/logQ=%d", logQ), func(b *testing.B) {
			eachSet(b, func(b *testing.B) {
				for b.Loop() {
					sub.Reduce(x.Coeffs[0], z.Coeffs[0])
				}
			})
		})
		b.Run(fmt.Sprintf("SubScalar/logQ=%d", logQ), func(b *testing.B) {
			eachSet(b, func(b *testing.B) {
				for b.Loop() {
					sub.SubScalar(x.Coeffs[0], 12345, z.Coeffs[0])
				}
			})
		})
	}
}
