package kernels_test

import (
	"encoding/binary"
	"slices"
	"strings"
	"testing"

	"github.com/tuneinsight/lattigo/v6/ring"

	"encmatch/core/kernels"
)

// FuzzKernelsEqualLattigo feeds arbitrary coefficients (any 64-bit value)
// to every routed loop at N = 64 modulo a 20-, a 36-, a 45-, a 50-, a 51-
// and a 61-bit prime: a canonical result must equal Lattigo's scalar one
// bit for bit, a lazy one be congruent to it, the Barrett and
// conditional-subtraction loops give Lattigo's words; NTTs must equal
// Lattigo's on the input reduced mod q.
func FuzzKernelsEqualLattigo(f *testing.F) {
	f.Add([]byte{0}, uint8(0))
	f.Add(slices.Repeat([]byte{0xff}, 2*64*8), uint8(1))
	logQs := []uint64{20, 36, 45, 50, 51, 61}
	rings := make([]*ring.Ring, len(logQs))
	for i, logQ := range logQs {
		g := ring.NewNTTFriendlyPrimesGenerator(logQ, 128)
		q, err := g.NextDownstreamPrime()
		if err != nil {
			f.Fatal(err)
		}
		if rings[i], err = ring.NewRing(64, []uint64{q}); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, which uint8) {
		sets := vectorSets(t)
		r := rings[int(which)%len(rings)]
		q := r.SubRings[0].Modulus
		words := make([]uint64, 3*64)
		for i := range words {
			var b [8]byte
			copy(b[:], data[min(len(data), 8*i):])
			words[i] = binary.LittleEndian.Uint64(b[:])
		}
		x, y, z0 := words[:64], words[64:128], words[128:]
		for _, op := range montOps {
			run := func(set kernels.Set) []uint64 {
				z := slices.Clone(z0)
				withSet(t, set, func() { op.run(r.SubRings[0], x, y, z) })
				return z
			}
			want := run(kernels.Scalar)
			for _, s := range sets {
				got := run(s)
				for i := range got {
					if got[i] == want[i] {
						continue
					}
					yi := y[i]
					if strings.HasPrefix(op.name, "MulScalar") {
						yi = y[0]
					}
					if op.canonical || !lattigoReduces(x[i], yi, q) || got[i]%q != want[i]%q {
						t.Fatalf("%s %s q=%d: coefficient %d = %d, Lattigo %d (x %d, y %d, z %d)", op.name, s, q, i, got[i], want[i], x[i], yi, z0[i])
					}
				}
			}
		}
		for _, op := range modLoops {
			run := func(set kernels.Set) []uint64 {
				z := slices.Clone(z0)
				withSet(t, set, func() { op.run(r.SubRings[0], x, y, y[0], z) })
				return z
			}
			want := run(kernels.Scalar)
			for _, s := range sets {
				if got := run(s); !slices.Equal(got, want) {
					t.Fatalf("%s %s q=%d: differs from Lattigo's", op.name, s, q)
				}
			}
		}
		p := r.NewPoly()
		copy(p.Coeffs[0], x)
		ref := r.NewPoly()
		copy(ref.Coeffs[0], reduce(x, q))
		for _, inverse := range []bool{false, true} {
			want := transform(t, r, kernels.Scalar, ref, inverse, false)
			for _, s := range sets {
				if !takes(t, q, 64, s) {
					continue // Lattigo's own code, whose domain is narrower
				}
				if got := transform(t, r, s, p, inverse, false); !slices.Equal(got, want) {
					t.Fatalf("inverse %v %s q=%d: differs from Lattigo's on the reduced input", inverse, s, q)
				}
			}
		}
	})
}

// FuzzBasisExtensionEqualsLattigo feeds arbitrary coefficients (any 64-bit
// value) to Lattigo's fast basis extension at N = 64, from a 20-, a 36-, a
// 55- and a 61-bit prime into a 30-, a 51- and a 61-bit prime
// (ring.ModUpExact, and Decomposer.DecomposeAndSplit with digits of two
// primes): every vector set's words must equal Lattigo's scalar ones.
func FuzzBasisExtensionEqualsLattigo(f *testing.F) {
	f.Add([]byte{0})
	f.Add(slices.Repeat([]byte{0xff}, 4*64*8))
	pick := func(logQs ...uint64) []uint64 {
		var qs []uint64
		for _, logQ := range logQs {
			g := ring.NewNTTFriendlyPrimesGenerator(logQ, 128)
			q, err := g.NextDownstreamPrime()
			if err != nil {
				f.Fatal(err)
			}
			qs = append(qs, q)
		}
		return qs
	}
	rQ, err := ring.NewRing(64, pick(20, 36, 55, 61))
	if err != nil {
		f.Fatal(err)
	}
	rP, err := ring.NewRing(64, pick(30, 51, 62))
	if err != nil {
		f.Fatal(err)
	}
	muc := ring.GenModUpConstants(rQ.ModuliChain(), rP.ModuliChain())
	dec := ring.NewDecomposer(rQ, rP)
	f.Fuzz(func(t *testing.T, data []byte) {
		sets := vectorSets(t)
		in := rQ.NewPoly()
		for i, row := range in.Coeffs {
			for k := range row {
				var b [8]byte
				copy(b[:], data[min(len(data), 8*(i*64+k)):])
				row[k] = binary.LittleEndian.Uint64(b[:])
			}
		}
		run := func(set kernels.Set) (out []ring.Poly) {
			withSet(t, set, func() {
				p := rP.NewPoly()
				ring.ModUpExact(in.Coeffs, p.Coeffs, rQ, rP, muc)
				out = append(out, p)
				for digit := 0; digit < 2; digit++ {
					dQ, dP := rQ.NewPoly(), rP.AtLevel(1).NewPoly()
					dec.DecomposeAndSplit(rQ.MaxLevel(), 1, 2, digit, *in.CopyNew(), dQ, dP)
					out = append(out, dQ, dP)
				}
			})
			return out
		}
		want := run(kernels.Scalar)
		for _, s := range sets {
			for k, got := range run(s) {
				if !got.Equal(&want[k]) {
					t.Fatalf("%s: output %d differs from Lattigo's", s, k)
				}
			}
		}
	})
}
