package kernels_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tuneinsight/lattigo/v6/ring"

	"encmatch/core/kernels"
)

// modLoops are Lattigo's element-wise loops that kernels.ModLoop takes,
// each run through ring.SubRing's method with a scalar s.
var modLoops = []struct {
	name string
	run  func(s *ring.SubRing, x, y []uint64, c uint64, z []uint64)
}{
	{"Reduce", func(s *ring.SubRing, x, _ []uint64, _ uint64, z []uint64) { s.Reduce(x, z) }},
	{"Add", func(s *ring.SubRing, x, y []uint64, _ uint64, z []uint64) { s.Add(x, y, z) }},
	{"AddScalar", func(s *ring.SubRing, x, _ []uint64, c uint64, z []uint64) { s.AddScalar(x, c, z) }},
	{"SubScalar", func(s *ring.SubRing, x, _ []uint64, c uint64, z []uint64) { s.SubScalar(x, c, z) }},
	{"MForm", func(s *ring.SubRing, x, _ []uint64, _ uint64, z []uint64) { s.MForm(x, z) }},
}

// TestModLoopsEqualLattigo runs Lattigo's Barrett and conditional-
// subtraction loops (Reduce, Add, AddScalar, SubScalar, MForm) under each
// vector set and under Lattigo's scalar code, on every prime and ring
// degree of the presets and every input kind, with scalars 0, 1, q - 1, q
// and random ones, in place and out of place: the kernels transcribe
// Lattigo's code on 64-bit words, so the words must be equal, whatever
// the inputs.
func TestModLoopsEqualLattigo(t *testing.T) {
	sets := vectorSets(t)
	rng := rand.New(rand.NewPCG(9, 10))
	for _, c := range presetRings(t) {
		r := c.newRing(t)
		sub := r.SubRings[0]
		n := r.N()
		vecs := inputs(n, c.q, rng)
		y := input("lazy2q", n, c.q, rng)
		for xname, x := range vecs {
			for _, scalar := range []uint64{0, 1, c.q - 1, c.q, rng.Uint64N(c.q), math.MaxUint64} {
				for _, op := range modLoops {
					for _, inPlace := range []bool{false, true} {
						run := func(set kernels.Set) []uint64 {
							z, src := make([]uint64, n), x
							if inPlace {
								z = slices.Clone(x)
								src = z
							}
							withSet(t, set, func() { op.run(sub, src, y, scalar, z) })
							return z
						}
						want := run(kernels.Scalar)
						for _, s := range sets {
							if got := run(s); !slices.Equal(got, want) {
								label := fmt.Sprintf("N=2^%d q=%d %s x=%s s=%d in place %v %s", c.logN, c.q, op.name, xname, scalar, inPlace, s)
								t.Fatalf("%s: differs from Lattigo's", label)
							}
						}
					}
				}
			}
		}
	}
}
