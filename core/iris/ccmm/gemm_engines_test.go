package ccmm

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// engines are the GEMM engines beside the Go kernel, with whether this CPU
// and build run them.
var engines = []struct {
	name       string
	has        bool
	gemm       func(x, yt Mat, q uint64) (Mat, error)
	maxModulus uint64
}{
	{"avx512-vnni", hasVNNI, gemmVNNI, maxVNNIModulus},
	{"avx2-int16", hasAVX2, gemmAVX2, maxAVX2Modulus},
}

// gemmVNNI is x * yt^T modulo q on the VNNI engine, its right operand
// packed once and used for x and for x's rows in reverse order (a
// packed operand serves many products).
func gemmVNNI(x, yt Mat, q uint64) (Mat, error) {
	r, err := newVNNIRight(yt, q)
	if err != nil {
		return Mat{}, err
	}
	return twice(x, r.mul)
}

// gemmAVX2 is gemmVNNI on the AVX2 engine.
func gemmAVX2(x, yt Mat, q uint64) (Mat, error) {
	r, err := newAVX2Right(yt, q)
	if err != nil {
		return Mat{}, err
	}
	return twice(x, r.mul)
}

// twice returns mul(x) after checking that mul of x's rows reversed is
// its rows reversed.
func twice(x Mat, mul func(Mat) Mat) (Mat, error) {
	rev := NewMat(x.Rows, x.Cols)
	for i := 0; i < x.Rows; i++ {
		copy(rev.Data[i*x.Cols:(i+1)*x.Cols], x.Data[(x.Rows-1-i)*x.Cols:])
	}
	c, cr := mul(x), mul(rev)
	for i := 0; i < c.Rows; i++ {
		for j := 0; j < c.Cols; j++ {
			if c.Data[i*c.Cols+j] != cr.Data[(c.Rows-1-i)*c.Cols+j] {
				return Mat{}, fmt.Errorf("a packed right operand gave row %d of a product, then another value for it", i)
			}
		}
	}
	return c, nil
}

// TestGEMMEnginesMatchGo: each engine this CPU runs equals the int64 Go
// kernel on shapes that cross every blocking boundary (rows around the
// register tiles (8, 4) and the row blocks (128, 64), inner dimensions
// around the 4-byte and 2-position groups and the cache blocks (1,024,
// 256, 128), columns around the panels (48, 8)), on random residues, on
// the extreme residues +-(q-1)/2 and 0, and on operands whose every product
// is the largest of one sign (the accumulators' worst case), for primes
// near 2^20, 2^23, 2^30 and 2^31 (the ones the engine takes) and small
// ones.
func TestGEMMEnginesMatchGo(t *testing.T) {
	ran := 0
	for _, e := range engines {
		if !e.has {
			t.Logf("%s: this CPU or build has no such engine", e.name)
			continue
		}
		ran++
		t.Run(e.name, func(t *testing.T) { checkEngine(t, e.gemm, e.maxModulus) })
	}
	if ran == 0 {
		t.Skip("this CPU or build runs no GEMM engine beside the Go kernel")
	}
}

func checkEngine(t *testing.T, gemm func(x, yt Mat, q uint64) (Mat, error), maxModulus uint64) {
	rng := rand.New(rand.NewPCG(3, 5))
	// 2^31 - 1, a 30-bit NTT prime, the first prime above 2^23,
	// 2^23 - 2^13 + 1, primes above and below 2^20, small ones.
	primes := []uint64{2147483647, 1073479681, 8388617, 8380417, 1073153, 1048193, 1032193, 786433, 12289, 3}
	shapes := []struct{ m, k, n int }{
		{1, 1, 1}, {7, 3, 5}, {9, 5, 47}, {8, 4, 48}, {17, 1023, 49}, {129, 1025, 97}, {130, 2051, 3}, {3, 4100, 50},
		{5, 257, 9}, {65, 511, 8}, {63, 513, 17}, {4, 2, 16}, {3, 129, 9}, {2, 127, 8},
	}
	for _, q := range primes {
		if q >= maxModulus {
			continue
		}
		h := int32(q / 2)
		for _, sh := range shapes {
			for _, fill := range []string{"random", "extreme", "saturated"} {
				x, yt := NewMat(sh.m, sh.k), NewMat(sh.n, sh.k)
				for k, m := range []Mat{x, yt} {
					for i := range m.Data {
						switch fill {
						case "random":
							m.Data[i] = int32(rng.Int64N(int64(q))) - h
						case "extreme":
							m.Data[i] = []int32{-h, h, 0, h, -h}[rng.IntN(5)]
						default: // every product at its largest, one sign per left row
							m.Data[i] = h
							if k == 0 && (i/sh.k)%2 == 1 {
								m.Data[i] = -h
							}
						}
					}
				}
				got, err := gemm(x, yt, q)
				if err != nil {
					t.Fatal(err)
				}
				want := gemmGo(x, yt, q)
				for i := range want.Data {
					if got.Data[i] != want.Data[i] {
						t.Fatalf("q=%d %dx%dx%d %s: entry %d is %d, want %d", q, sh.m, sh.k, sh.n, fill, i, got.Data[i], want.Data[i])
					}
				}
			}
		}
	}
}

// TestGEMMEnginesRefuseWideModuli: a modulus at or above an engine's
// bound (2^31 for both engines' digits) is refused, and the dispatcher
// sends a modulus the engines refuse to the Go kernel, whose product is
// exact; a 25-bit modulus (four digits on the VNNI engine, three on the
// AVX2 one) is exact too.
func TestGEMMEnginesRefuseWideModuli(t *testing.T) {
	x := NewMat(2, 4)
	for _, e := range engines {
		if !e.has {
			continue
		}
		if _, err := e.gemm(x, x, e.maxModulus+1); !errors.Is(err, ErrModulus) {
			t.Fatalf("%s: modulus %d: got %v, want ErrModulus", e.name, e.maxModulus+1, err)
		}
	}
	for _, q := range []uint64{1<<25 - 39, 1<<31 + 11} {
		x.Data = []int32{1 << 24, -(1 << 24), 5, 7, 3, 1, -1, 2}
		yt := NewMat(1, 4)
		yt.Data = []int32{1 << 24, 1 << 24, 1, 1}
		want := make([]int32, 2)
		for i := range want {
			s := int64(0)
			for l := 0; l < 4; l++ {
				s += int64(x.Data[i*4+l]) * int64(yt.Data[l]) % int64(q)
			}
			want[i] = reduce(s, int64(q))
		}
		if got := GEMM(x, yt, q); got.Data[0] != want[0] || got.Data[1] != want[1] {
			t.Fatalf("GEMM modulo %d: %v, want %v", q, got.Data, want)
		}
	}
}

// TestParameterSetsUseTheEngines: every prime of the iris and toy sets is
// one the engines take (their "20-bit" primes are NTT-friendly primes just
// above 2^20), so GEMM does not fall back to the Go kernel on them.
func TestParameterSetsUseTheEngines(t *testing.T) {
	for name, lit := range map[string]Literal{"Iris": Iris, "IrisBootstrap": IrisBootstrap, "Toy": Toy} {
		p := mustParams(t, lit)
		for _, q := range append(append([]uint64(nil), p.Q...), p.K...) {
			if q >= maxVNNIModulus || q >= maxAVX2Modulus {
				t.Errorf("%s: prime %d is outside the engines' moduli (< 2^23)", name, q)
			}
		}
	}
}
