package kernels_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tuneinsight/lattigo/v6/ring"

	"encmatch/core/kernels"
)

// lattigoTensor is the reference: Lattigo's MulCoeffsMontgomeryThenAdd,
// product after product, on Lattigo's scalar code.
func lattigoTensor(t *testing.T, s *ring.SubRing, a0, a1, b0, b1 [][]uint64, t0, t1, t2 []uint64) {
	withSet(t, kernels.Scalar, func() {
		for i := range a0 {
			s.MulCoeffsMontgomeryThenAdd(a0[i], b0[i], t0)
			s.MulCoeffsMontgomeryThenAdd(a0[i], b1[i], t1)
			s.MulCoeffsMontgomeryThenAdd(a1[i], b0[i], t1)
			s.MulCoeffsMontgomeryThenAdd(a1[i], b1[i], t2)
		}
	})
}

func TestMulAddTensorEqualsLattigo(t *testing.T) {
	sets := vectorSets(t)
	rng := rand.New(rand.NewPCG(5, 6))
	for _, c := range presetRings(t) {
		if c.logN > 10 {
			c.logN = 10 // two tiles: the arithmetic does not depend on the degree
		}
		r, err := ring.NewRing(1<<c.logN, []uint64{c.q})
		if err != nil {
			t.Fatal(err)
		}
		sub, n := r.SubRings[0], r.N()
		for _, count := range []int{1, 3, 130} {
			for _, kind := range []string{"random", "lazy2q", "q-1", "edges", "mostlysmall"} {
				// The 64-bit values of "mostlysmall" go to the a side only:
				// Lattigo's own reduction needs x*y < q*2^64.
				vec := func() []uint64 { return input(kind, n, c.q, rng) }
				other := vec
				if kind == "mostlysmall" {
					other = func() []uint64 { return input("random", n, c.q, rng) }
				}
				var a0, a1, b0, b1 [][]uint64
				for range count {
					a0, a1, b0, b1 = append(a0, vec()), append(a1, vec()), append(b0, other()), append(b1, other())
				}
				start := [3][]uint64{input("random", n, c.q, rng), input("q-1", n, c.q, rng), input("random", n, c.q, rng)}
				want := [3][]uint64{slices.Clone(start[0]), slices.Clone(start[1]), slices.Clone(start[2])}
				lattigoTensor(t, sub, a0, a1, b0, b1, want[0], want[1], want[2])
				for _, s := range sets {
					label := fmt.Sprintf("N=2^%d q=%d count=%d %s %s", c.logN, c.q, count, kind, s)
					got := [3][]uint64{slices.Clone(start[0]), slices.Clone(start[1]), slices.Clone(start[2])}
					var ran, takes bool
					withSet(t, s, func() {
						takes = kernels.TakesTensor(c.q)
						ran = kernels.MulAddTensor(a0, a1, b0, b1, got[0], got[1], got[2], c.q)
					})
					if !ran {
						if takes && n >= 64 {
							t.Fatalf("%s: the kernel declined a prime it takes", label)
						}
						continue
					}
					for k := range got {
						if !slices.Equal(got[k], want[k]) {
							t.Fatalf("%s: t%d differs from Lattigo's", label, k)
						}
					}
				}
			}
		}
	}
}
