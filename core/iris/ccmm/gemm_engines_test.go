package ccmm

import (
	"errors"
	"math/rand/v2"
	"testing"
)

// engines are the GEMM engines beside the Go kernel, with whether this CPU
// and build run them.
var engines = []struct {
	name string
	has  bool
	gemm func(x, yt Mat, q uint64) (Mat, error)
}{
	{"avx512-vnni", hasVNNI, gemmVNNI},
	{"avx2-int16", hasAVX2, gemmAVX2},
}

// TestGEMMEnginesMatchGo: each engine this CPU runs equals the int64 Go
// kernel on shapes that cross every blocking boundary (rows around the
// register tiles (8, 4) and the row blocks (128, 64), inner dimensions
// around the 4-byte and 2-position groups and the cache blocks (1,024,
// 256), columns around the panels (48, 8)), on random residues and on the
// extreme residues +-(q-1)/2 and 0, for primes near 2^20 and 2^23 and
// small ones.
func TestGEMMEnginesMatchGo(t *testing.T) {
	ran := 0
	for _, e := range engines {
		if !e.has {
			t.Logf("%s: this CPU or build has no such engine", e.name)
			continue
		}
		ran++
		t.Run(e.name, func(t *testing.T) { checkEngine(t, e.gemm) })
	}
	if ran == 0 {
		t.Skip("this CPU or build runs no GEMM engine beside the Go kernel")
	}
}

func checkEngine(t *testing.T, gemm func(x, yt Mat, q uint64) (Mat, error)) {
	rng := rand.New(rand.NewPCG(3, 5))
	primes := []uint64{8380417, 1073153, 1048193, 1032193, 786433, 12289, 3} // 2^23 - 2^13 + 1, primes above and below 2^20
	shapes := []struct{ m, k, n int }{
		{1, 1, 1}, {7, 3, 5}, {9, 5, 47}, {8, 4, 48}, {17, 1023, 49}, {129, 1025, 97}, {130, 2051, 3}, {3, 4100, 50},
		{5, 257, 9}, {65, 511, 8}, {63, 513, 17}, {4, 2, 16},
	}
	for _, q := range primes {
		h := int32(q / 2)
		for _, sh := range shapes {
			for _, fill := range []string{"random", "extreme"} {
				x, yt := NewMat(sh.m, sh.k), NewMat(sh.n, sh.k)
				for _, m := range []Mat{x, yt} {
					for i := range m.Data {
						if fill == "random" {
							m.Data[i] = int32(rng.Int64N(int64(q))) - h
						} else {
							m.Data[i] = []int32{-h, h, 0, h, -h}[rng.IntN(5)]
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

// TestGEMMEnginesRefuseWideModuli: a modulus of 2^23 or more does not fit
// the engines' digits, and the dispatcher sends it to the Go kernel
// instead.
func TestGEMMEnginesRefuseWideModuli(t *testing.T) {
	x := NewMat(2, 4)
	for _, e := range engines {
		if _, err := e.gemm(x, x, 1<<23+9); e.has && !errors.Is(err, ErrModulus) {
			t.Fatalf("%s: modulus above 2^23: got %v, want ErrModulus", e.name, err)
		}
	}
	q := uint64(1<<25 - 39) // still exact in the Go kernel
	x.Data = []int32{1 << 24, -(1 << 24), 5, 7, 3, 1, -1, 2}
	yt := NewMat(1, 4)
	yt.Data = []int32{1 << 24, 1 << 24, 1, 1}
	if got, want := GEMM(x, yt, q), gemmGo(x, yt, q); got.Data[0] != want.Data[0] || got.Data[1] != want.Data[1] {
		t.Fatalf("GEMM with a 21-bit modulus: %v, want %v", got.Data, want.Data)
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
