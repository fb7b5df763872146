// Package autbench compares, on the face search's shapes (N = 2^15, 18
// residues: Q and P at the default preset), Lattigo v6.2.0's loop order for
// AutomorphismNTTWithIndex (a block of 8 coefficients across every level,
// then the next block) with the level-outer order (every coefficient of
// one level, then the next), both plain Go gathers: the data for a decision
// on issue 36's rules, not project code.
package autbench

import (
	"math/rand"
	"testing"
	"unsafe"
)

const n, levels = 1 << 15, 18

func setup() ([][]uint64, [][]uint64, []uint64) {
	in, out := make([][]uint64, levels), make([][]uint64, levels)
	for i := range in {
		in[i], out[i] = make([]uint64, n), make([]uint64, n)
		for j := range in[i] {
			in[i][j] = rand.Uint64()
		}
	}
	// The NTT-domain index of the Galois element 5^1 (a rotation by one),
	// as Lattigo's AutomorphismNTTIndex builds it.
	index := make([]uint64, n)
	logNthRoot := 16
	mask := uint64(2*n - 1)
	for i := 0; i < n; i++ {
		tmp1 := 2*bitReverse(uint64(i), logNthRoot-1) + 1
		tmp2 := ((5*tmp1&mask)-1)>>1
		index[i] = bitReverse(tmp2, logNthRoot-1)
	}
	return in, out, index
}

func bitReverse(x uint64, bits int) uint64 {
	var r uint64
	for i := 0; i < bits; i++ {
		r = r<<1 | (x>>i)&1
	}
	return r
}

// lattigoOrder is Lattigo v6.2.0's loop (ring/automorphism.go).
func lattigoOrder(in, out [][]uint64, index []uint64) {
	for j := 0; j < n; j += 8 {
		x := (*[8]uint64)(unsafe.Pointer(&index[j]))
		for i := 0; i < levels; i++ {
			z := (*[8]uint64)(unsafe.Pointer(&out[i][j]))
			y := in[i]
			z[0], z[1], z[2], z[3] = y[x[0]], y[x[1]], y[x[2]], y[x[3]]
			z[4], z[5], z[6], z[7] = y[x[4]], y[x[5]], y[x[6]], y[x[7]]
		}
	}
}

// levelOuter gathers one level at a time.
func levelOuter(in, out [][]uint64, index []uint64) {
	for i := 0; i < levels; i++ {
		y, z := in[i], out[i]
		for j := 0; j < n; j += 8 {
			x := (*[8]uint64)(unsafe.Pointer(&index[j]))
			w := (*[8]uint64)(unsafe.Pointer(&z[j]))
			w[0], w[1], w[2], w[3] = y[x[0]], y[x[1]], y[x[2]], y[x[3]]
			w[4], w[5], w[6], w[7] = y[x[4]], y[x[5]], y[x[6]], y[x[7]]
		}
	}
}

func TestSameResult(t *testing.T) {
	in, a, index := setup()
	_, b, _ := setup()
	lattigoOrder(in, a, index)
	levelOuter(in, b, index)
	for i := range a {
		for j := range a[i] {
			if a[i][j] != b[i][j] {
				t.Fatalf("level %d coefficient %d differs", i, j)
			}
		}
	}
}

func BenchmarkAutomorphism(b *testing.B) {
	in, out, index := setup()
	b.Run("lattigo-order", func(b *testing.B) {
		for range b.N {
			lattigoOrder(in, out, index)
		}
	})
	b.Run("level-outer", func(b *testing.B) {
		for range b.N {
			levelOuter(in, out, index)
		}
	})
}
