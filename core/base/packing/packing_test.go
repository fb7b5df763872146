package packing

import (
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"
)

func randomUnit(rng *rand.Rand, dim, l int) []float64 {
	v := make([]float32, dim)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	out, err := Normalize(v, dim, l, 0)
	if err != nil {
		panic(err)
	}
	return out
}

// checkScores requires slot t of s to be half the inner product of q with
// vecs[t] (the scale 0.5 of the diagonals), and 0 past the vectors.
func checkScores(t *testing.T, name string, s, q []float64, vecs [][]float64) {
	t.Helper()
	for tt := range s {
		want := 0.0
		if tt < len(vecs) {
			for k := range q {
				want += 0.5 * q[k] * vecs[tt][k]
			}
		}
		if math.Abs(s[tt]-want) > 1e-12 {
			t.Fatalf("%s slot %d: %v want %v", name, tt, s[tt], want)
		}
	}
}

// TestScoresAreInnerProducts checks the layout: slot t of the diagonal
// product scores vector t of the group, for a partial group too.
func TestScoresAreInnerProducts(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, c := range []struct{ dim, slots, n int }{{3, 16, 16}, {5, 64, 37}, {16, 64, 64}, {12, 128, 100}} {
		l := 1
		for l < c.dim {
			l <<= 1
		}
		vecs := make([][]float64, c.n)
		for i := range vecs {
			vecs[i] = randomUnit(rng, c.dim, l)
		}
		q := randomUnit(rng, c.dim, l)
		diags, err := Diagonals(vecs, l, c.slots, 0.5)
		if err != nil {
			t.Fatal(err)
		}
		s := Scores(diags, ReplicateQuery(q, c.slots))
		checkScores(t, fmt.Sprintf("%+v", c), s, q, vecs)
	}
}

// TestFoldedScoresAreInnerProducts checks the folded layout: twice the real
// part of slot t of the folded product is the inner product with vector t,
// with half the diagonals, also when the vectors' halves differ in norm.
func TestFoldedScoresAreInnerProducts(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for _, c := range []struct{ dim, slots, n int }{{3, 16, 16}, {5, 64, 37}, {16, 64, 64}, {12, 128, 100}, {512, 1024, 700}} {
		l := 1
		for l < c.dim {
			l <<= 1
		}
		vecs := make([][]float64, c.n)
		folded := make([][]complex128, c.n)
		for i := range vecs {
			vecs[i] = randomUnit(rng, c.dim, l)
			if i%3 == 0 { // most of the norm in the first half
				for k := l / 2; k < l; k++ {
					vecs[i][k] *= 0.1
				}
			}
			folded[i] = Fold(vecs[i])
		}
		q := randomUnit(rng, c.dim, l)
		diags, err := Diagonals(folded, l/2, c.slots, 0.5)
		if err != nil {
			t.Fatal(err)
		}
		if len(diags) != l/2 {
			t.Fatalf("%d folded diagonals for block %d", len(diags), l)
		}
		s := RealPart(Scores(diags, ReplicateQuery(FoldQuery(q), c.slots)))
		checkScores(t, fmt.Sprintf("%+v", c), s, q, vecs)
	}
}

func TestNormalizeRejectsBadVectors(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	cases := map[string][]float32{"dimension": {1, 2}, "non-finite": {1, nan, 0}, "zero vector": {0, 0, 0}}
	cases["non-finite "] = []float32{inf, 0, 1}
	for want, v := range cases {
		_, err := Normalize(v, 3, 4, 7)
		if err == nil || !strings.Contains(err.Error(), strings.TrimSpace(want)) || !strings.Contains(err.Error(), "vector 7") {
			t.Errorf("%v: error %v, want it to mention %q and the row", v, err, want)
		}
	}
	if _, err := Diagonals(make([][]float64, 5), 4, 4, 1); err == nil {
		t.Error("overfull group accepted")
	}
}

func TestRotate(t *testing.T) {
	v := []float64{0, 1, 2, 3}
	for r, want := range map[int][]float64{1: {1, 2, 3, 0}, -1: {3, 0, 1, 2}, 4: {0, 1, 2, 3}, -6: {2, 3, 0, 1}} {
		got := Rotate(v, r)
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("Rotate(%v, %d) = %v, want %v", v, r, got, want)
			}
		}
	}
}
