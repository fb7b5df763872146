package kernels_test

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"

	"encmatch/core/base/params"
	"encmatch/core/iris/irisparams"
	"encmatch/core/kernels"
)

// ringCase is one prime at one ring degree.
type ringCase struct {
	logN int
	q    uint64
}

// newRing is the ring of degree 2^logN modulo q alone.
func (c ringCase) newRing(t *testing.T) *ring.Ring {
	t.Helper()
	r, err := ring.NewRing(1<<c.logN, []uint64{c.q})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// presetRings gives every (ring degree, prime) of the project's face
// presets (with and without the payload level, kappa 1 and 13) and iris
// presets (the encrypted matrix product's rings, the bootstrapping's
// residual and main rings, the fold's ring), plus NTT primes at the
// kernels' edges (just above 2^16, 2^40 and 2^51, just below 2^50, 2^51
// and 2^61) and at the iris presets' sizes (20, 30, 36, 39 and 55 bits),
// and ring degrees at and below the smallest the kernels take.
func presetRings(t *testing.T) []ringCase {
	t.Helper()
	seen := map[ringCase]bool{}
	var out []ringCase
	add := func(c ringCase) {
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	for _, preset := range params.Presets {
		for _, kappa := range []int{1, 13} {
			for _, payload := range []bool{false, true} {
				s, err := params.NewWith(preset, kappa, 512, payload)
				if err != nil {
					continue
				}
				for _, q := range append(s.CKKS.Q(), s.CKKS.P()...) {
					add(ringCase{s.CKKS.LogN(), q})
				}
			}
		}
	}
	for _, c := range irisRings(t) {
		add(c)
	}
	for _, logN := range []int{4, 5, 6, 12, 16} {
		for _, logQ := range []int{18, 20, 30, 36, 39, 41, 50, 51, 52, 55, 61} {
			if logQ < logN+4 {
				continue // few or no primes of logQ bits are 1 mod 2^(logN+1)
			}
			g := ring.NewNTTFriendlyPrimesGenerator(uint64(logQ), uint64(2<<logN))
			var q uint64
			var err error
			if logQ == 18 || logQ == 41 || logQ == 52 {
				q, err = g.NextUpstreamPrime()
			} else {
				q, err = g.NextDownstreamPrime()
			}
			if err != nil {
				t.Fatal(err)
			}
			add(ringCase{logN, q})
		}
	}
	return out
}

// irisRings gives every (ring degree, prime) of the iris presets: the
// database and query rings over Q and K, the bootstrapping's residual ring
// and main ring (Q and P), and the fold's ring (Q and P) of folding
// presets.
func irisRings(t *testing.T) []ringCase {
	t.Helper()
	var out []ringCase
	addAll := func(logN int, qs ...[]uint64) {
		for _, q := range qs {
			for _, v := range q {
				out = append(out, ringCase{logN, v})
			}
		}
	}
	for name := range irisparams.Presets {
		p, err := irisparams.Build(name, 0)
		if err != nil {
			t.Fatalf("iris preset %s: %v", name, err)
		}
		for _, logN := range []int{p.CCMM.DB.LogN(), p.CCMM.Query.LogN()} {
			addAll(logN, p.CCMM.Q, p.CCMM.K)
		}
		for _, ps := range []ckks.Parameters{p.Slots.Residual, p.Slots.Bootstrap.BootstrappingParameters} {
			addAll(ps.LogN(), ps.Q(), ps.P())
		}
		if p.Folds() {
			fp, _, err := p.PairFold(1-2*0.34, 31)
			if err != nil {
				t.Fatal(err)
			}
			addAll(fp.CKKS.LogN(), fp.CKKS.Q(), fp.CKKS.P())
		}
	}
	return out
}

// kinds are the test vectors' kinds: random canonical values, zero, all
// q-1, random lazy values in [0, 2q) and [0, 4q), the edges 0, 1, q-1, q,
// q+1, 2q-1, any 64-bit value, any 52-bit value (IFMA operands whose
// product, modulo a prime below 2^40, can be past Lattigo's Montgomery
// reduction), and canonical values with a few 64-bit ones that no kernel
// lane takes.
var kinds = []string{"random", "zero", "q-1", "lazy2q", "lazy4q", "edges", "huge", "ifma52", "mostlysmall"}

// input is one test vector of a kind.
func input(kind string, n int, q uint64, rng *rand.Rand) []uint64 {
	v := make([]uint64, n)
	for i := range v {
		switch kind {
		case "random":
			v[i] = rng.Uint64N(q)
		case "zero":
		case "q-1":
			v[i] = q - 1
		case "lazy2q":
			v[i] = rng.Uint64N(2 * q)
		case "lazy4q":
			v[i] = rng.Uint64N(4 * q)
		case "edges":
			v[i] = []uint64{0, 1, q - 1, q, q + 1, 2*q - 1}[i%6]
		case "huge":
			v[i] = rng.Uint64()
		case "ifma52":
			v[i] = rng.Uint64N(1 << 52)
		case "mostlysmall":
			if v[i] = rng.Uint64N(q); i%97 == 5 {
				v[i] = rng.Uint64()
			}
		default:
			panic("unknown kind " + kind)
		}
	}
	return v
}

// inputs are one vector of every kind.
func inputs(n int, q uint64, rng *rand.Rand) map[string][]uint64 {
	out := map[string][]uint64{}
	for _, k := range kinds {
		out[k] = input(k, n, q, rng)
	}
	return out
}

// withSet runs f under a kernel set, restoring the previous one.
func withSet(t *testing.T, s kernels.Set, f func()) {
	t.Helper()
	prev := kernels.Active()
	if err := kernels.Use(s); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := kernels.Use(prev); err != nil {
			t.Fatal(err)
		}
	}()
	f()
}

// vectorSets are the sets to compare against Lattigo's scalar code.
func vectorSets(t *testing.T) []kernels.Set {
	sets := slices.DeleteFunc(kernels.Available(), func(s kernels.Set) bool { return s == kernels.Scalar })
	if len(sets) == 0 {
		t.Skip("this CPU runs no vector kernel set")
	}
	return sets
}

// takes reports whether set s runs an NTT kernel for q at degree n.
func takes(t *testing.T, q uint64, n int, s kernels.Set) (ok bool) {
	withSet(t, s, func() { ok = kernels.Takes(q, n) })
	return ok
}

// transform is Lattigo's NTT of src under a kernel set: the inverse when
// inverse, the lazy variant when lazy.
func transform(t *testing.T, r *ring.Ring, s kernels.Set, src ring.Poly, inverse, lazy bool) []uint64 {
	out := r.NewPoly()
	withSet(t, s, func() {
		switch {
		case inverse && lazy:
			r.INTTLazy(src, out)
		case inverse:
			r.INTT(src, out)
		case lazy:
			r.NTTLazy(src, out)
		default:
			r.NTT(src, out)
		}
	})
	return out.Coeffs[0]
}

// reduce gives v mod q.
func reduce(v []uint64, q uint64) []uint64 {
	out := make([]uint64, len(v))
	for i, x := range v {
		out[i] = x % q
	}
	return out
}

// lazyNTTBound bounds a lazy NTT's outputs modulo q under a kernel set
// that takes q or not: the kernels' 64-bit butterflies (q >= 2^51) keep
// them in [0, 2q), the range Lattigo documents; Lattigo's own butterflies
// and the others reach 6q - 2 (any word where 6q passes 2^64).
func lazyNTTBound(q uint64, kernel bool) uint64 {
	switch {
	case kernel && q >= 1<<51:
		return 2 * q
	case q > math.MaxUint64/6:
		return math.MaxUint64
	}
	return 6*q - 1
}

// inRange reports the first index where v >= bound, or -1.
func inRange(v []uint64, bound uint64) int {
	for i, x := range v {
		if x >= bound {
			return i
		}
	}
	return -1
}

func TestNTTEqualsLattigo(t *testing.T) {
	sets := vectorSets(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range presetRings(t) {
		r := c.newRing(t)
		n := r.N()
		for name, in := range inputs(n, c.q, rng) {
			p := r.NewPoly()
			copy(p.Coeffs[0], in)
			for _, s := range sets {
				// Lattigo's NTT is exact for inputs below 2q; for the
				// others a kernel's result must be the NTT of the input
				// mod q.
				ref := r.NewPoly()
				switch {
				case inRange(in, 2*c.q) < 0:
					copy(ref.Coeffs[0], in)
				case takes(t, c.q, n, s):
					copy(ref.Coeffs[0], reduce(in, c.q))
				default:
					continue // Lattigo's own code on inputs outside its domain
				}
				label := fmt.Sprintf("N=2^%d q=%d (%d bits) %s %s", c.logN, c.q, bits.Len64(c.q), name, s)
				want := transform(t, r, kernels.Scalar, ref, false, false)
				if got := transform(t, r, s, p, false, false); !slices.Equal(got, want) {
					t.Fatalf("%s: NTT differs from Lattigo's", label)
				}
				got := transform(t, r, s, p, false, true)
				if i := inRange(got, lazyNTTBound(c.q, takes(t, c.q, n, s))); i >= 0 {
					t.Fatalf("%s: lazy NTT coefficient %d = %d outside Lattigo's range", label, i, got[i])
				}
				if !slices.Equal(reduce(got, c.q), want) {
					t.Fatalf("%s: lazy NTT not congruent to Lattigo's", label)
				}
				// In place, as Lattigo's callers often run it.
				inPlace := *p.CopyNew()
				withSet(t, s, func() { r.NTT(inPlace, inPlace) })
				if !slices.Equal(inPlace.Coeffs[0], want) {
					t.Fatalf("%s: in-place NTT differs from Lattigo's", label)
				}

				for _, lazy := range []bool{false, true} {
					if !slices.Equal(transform(t, r, s, p, true, lazy), transform(t, r, kernels.Scalar, ref, true, lazy)) {
						t.Fatalf("%s: INTT (lazy %v) differs from Lattigo's", label, lazy)
					}
				}
			}
		}
	}
}

// montOps are Lattigo's element-wise Montgomery loops through its API,
// each with whether its result is canonical (so bit-exact) and, for a lazy
// one, the range [lo, hi] of its change to z, as Lattigo states it.
var montOps = []struct {
	name      string
	canonical bool
	run       func(s *ring.SubRing, x, y, z []uint64)
	overwrite bool
	lazy      func(q uint64) (lo, hi uint64)
}{
	{"MulCoeffsMontgomery", true, func(s *ring.SubRing, x, y, z []uint64) { s.MulCoeffsMontgomery(x, y, z) }, true, nil},
	{"MulCoeffsMontgomeryLazy", false, func(s *ring.SubRing, x, y, z []uint64) { s.MulCoeffsMontgomeryLazy(x, y, z) }, true, plusLazy},
	{"MulCoeffsMontgomeryThenAdd", true, func(s *ring.SubRing, x, y, z []uint64) { s.MulCoeffsMontgomeryThenAdd(x, y, z) }, false, nil},
	{"MulCoeffsMontgomeryThenAddLazy", true, func(s *ring.SubRing, x, y, z []uint64) { s.MulCoeffsMontgomeryThenAddLazy(x, y, z) }, false, nil},
	{"MulCoeffsMontgomeryLazyThenAddLazy", false, func(s *ring.SubRing, x, y, z []uint64) { s.MulCoeffsMontgomeryLazyThenAddLazy(x, y, z) }, false, plusLazy},
	{"MulCoeffsMontgomeryThenSub", true, func(s *ring.SubRing, x, y, z []uint64) { s.MulCoeffsMontgomeryThenSub(x, y, z) }, false, nil},
	{"MulCoeffsMontgomeryThenSubLazy", true, func(s *ring.SubRing, x, y, z []uint64) { s.MulCoeffsMontgomeryThenSubLazy(x, y, z) }, false, nil},
	{"MulCoeffsMontgomeryLazyThenSubLazy", false, func(s *ring.SubRing, x, y, z []uint64) { s.MulCoeffsMontgomeryLazyThenSubLazy(x, y, z) }, false, minusLazy},
	{"MulCoeffsMontgomeryLazyThenNeg", false, func(s *ring.SubRing, x, y, z []uint64) { s.MulCoeffsMontgomeryLazyThenNeg(x, y, z) }, true, minusLazy},
	{"MulScalarMontgomery", true, func(s *ring.SubRing, x, y, z []uint64) { s.MulScalarMontgomery(x, y[0], z) }, true, nil},
	{"MulScalarMontgomeryLazy", false, func(s *ring.SubRing, x, y, z []uint64) { s.MulScalarMontgomeryLazy(x, y[0], z) }, true, plusLazy},
	{"MulScalarMontgomeryThenAdd", true, func(s *ring.SubRing, x, y, z []uint64) { s.MulScalarMontgomeryThenAdd(x, y[0], z) }, false, nil},
	{"SubThenMulScalarMontgomeryTwoModulus", true, func(s *ring.SubRing, x, y, z []uint64) {
		s.SubThenMulScalarMontgomeryTwoModulus(x, y, z[0]%s.Modulus, z)
	}, true, nil},
}

// plusLazy is MRedLazy's range, [0, 2q-1]; minusLazy that of 2q - MRedLazy.
func plusLazy(q uint64) (uint64, uint64)  { return 0, 2*q - 1 }
func minusLazy(q uint64) (uint64, uint64) { return 1, 2 * q }

// lattigoReduces reports whether Lattigo's Montgomery reduction of x*y is
// a reduction (x*y < q*2^64); elsewhere only bit equality is checked.
func lattigoReduces(x, y, q uint64) bool {
	hi, _ := bits.Mul64(x, y)
	return hi < q
}

func TestMontgomeryLoopsEqualLattigo(t *testing.T) {
	sets := vectorSets(t)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range presetRings(t) {
		r := c.newRing(t)
		sub := r.SubRings[0]
		n := r.N()
		vecs := inputs(n, c.q, rng)
		z0 := input("random", n, c.q, rng)
		for xname, x := range vecs {
			for yname, y := range vecs {
				for _, op := range montOps {
					run := func(set kernels.Set) []uint64 {
						z := slices.Clone(z0)
						withSet(t, set, func() { op.run(sub, x, y, z) })
						return z
					}
					want := run(kernels.Scalar)
					for _, s := range sets {
						got := run(s)
						label := fmt.Sprintf("N=2^%d q=%d %s x=%s y=%s %s", c.logN, c.q, op.name, xname, yname, s)
						// From 2^51 the kernels transcribe Lattigo's 64-bit
						// reduction: the same words, lazy or not.
						if op.canonical || c.q >= 1<<51 {
							if !slices.Equal(got, want) {
								t.Fatalf("%s: differs from Lattigo's", label)
							}
							continue
						}
						lo, hi := op.lazy(c.q)
						for i := range got {
							yi := y[i]
							if strings.HasPrefix(op.name, "MulScalar") {
								yi = y[0]
							}
							if !lattigoReduces(x[i], yi, c.q) {
								if got[i] != want[i] {
									t.Fatalf("%s: coefficient %d = %d, Lattigo %d", label, i, got[i], want[i])
								}
								continue
							}
							base := z0[i]
							if op.overwrite {
								base = 0
							}
							if d := got[i] - base; d < lo || d > hi || got[i]%c.q != want[i]%c.q {
								t.Fatalf("%s: coefficient %d = %d, Lattigo %d (z was %d)", label, i, got[i], want[i], base)
							}
						}
					}
				}
			}
		}
	}
}

func TestUseRefusesUnknownSets(t *testing.T) {
	if err := kernels.Use("avx9000"); err == nil {
		t.Fatal("an unknown kernel set was accepted")
	}
}
