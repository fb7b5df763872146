package engine

import (
	"math"
	"math/rand"
	"reflect"
	"testing"

	"encmatch/core/base/params"
	"encmatch/core/face/index"
	"encmatch/core/face/strategy"
)

// skewed returns a unit vector whose first half carries weight w of its
// squared norm (the halves of a folded vector differ in norm).
func skewed(rng *rand.Rand, dim int, w float64) []float64 {
	v := randomUnit(rng, dim)
	h := params.PaddedDim(dim) / 2
	var lo, hi float64
	for i, x := range v {
		if i < h {
			lo += x * x
		} else {
			hi += x * x
		}
	}
	for i := range v {
		if i < h {
			v[i] *= math.Sqrt(w / lo)
		} else {
			v[i] *= math.Sqrt((1 - w) / hi)
		}
	}
	return unit(v)
}

// TestEndToEndFolded runs folded key sets (half the diagonals, the real part
// taken once per group) through the strategies, both enrollments, in memory
// and streamed: every decision outside the band equals brute force, with
// planted scores crowding delta on both sides, a query whose halves differ
// in norm (90 % of it in one half) and gallery vectors skewed either way.
func TestEndToEndFolded(t *testing.T) {
	const dim, delta = 24, 0.5 // padded 32, folded block 16
	cases := []struct {
		name           string
		n1             int
		stream, seeded bool
	}{{strategy.BSGSTBE, 4, false, true}, {strategy.BSGSTBE, 4, true, false}, {strategy.DG, 0, false, false},
		{strategy.BSGSTBS, 4, false, true}, {strategy.BSGSDiagonal, 3, true, true}}
	for _, c := range cases {
		rng := rand.New(rand.NewSource(17))
		set, err := params.New(params.Toy, 8, dim)
		if err != nil {
			t.Fatal(err)
		}
		if set, err = set.WithFold(true); err != nil {
			t.Fatal(err)
		}
		if set.L() != 16 {
			t.Fatalf("folded block %d, want 16", set.L())
		}
		f := newFixtureOf(t, set, c.name, c.n1, delta, index.CreateOptions{})
		q := skewed(rng, dim, 0.9)
		gal := gallery(rng, q, 2300, []float64{0.53, 0.51, 0.505, 0.502, 0.498, 0.495, 0.49, 0.8, 1.0})
		for i := 0; i < 200; i++ { // skewed entries, the other way round
			gal[i] = f32(skewed(rng, dim, 0.05))
		}
		if c.seeded {
			f.enrollSeeded(t, gal)
		} else {
			f.enroll(t, gal)
		}
		srv := f.open(t, c.stream)
		if m := check(t, f, srv, gal, f32(q)); len(m) < 4 {
			t.Fatalf("%s: expected the planted matches, got %v", c.name, m)
		}
		check(t, f, srv, gal, f32(skewed(rng, dim, 0.02)))
	}
}

// TestFoldNeedsComplexSlots: the conjugate-invariant ring has no imaginary
// part to fold into.
func TestFoldNeedsComplexSlots(t *testing.T) {
	set, err := params.New(params.ToyReal, 8, 24)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := set.WithFold(true); err == nil {
		t.Fatal("folding accepted on the conjugate-invariant ring")
	}
}

// TestFoldedPayloadSearch: a folded key set with the payload level fetches
// exactly the brute-force matches' payloads.
func TestFoldedPayloadSearch(t *testing.T) {
	rng := rand.New(rand.NewSource(19))
	const dim, delta, width = 64, 0.5, 3
	set, err := params.NewWith(params.Toy, 13, dim, true)
	if err == nil {
		set, err = set.WithFold(true)
	}
	if err != nil {
		t.Fatal(err)
	}
	f := newFixtureOf(t, set, strategy.BSGSTBE, 4, delta, index.CreateOptions{PayloadWidth: width})
	q := randomUnit(rng, dim)
	gal := gallery(rng, q, 2500, crowdOutsideTheBand(t, rng, 13, delta, 9, 100, 0.03))
	pay := randomPayloads(rng, len(gal), width)
	f.enrollPayloads(t, gal, pay, true)
	srv := f.open(t, false)
	rows, positions := bruteForcePayloads(srv.Manifest, gal, pay, f32(q))
	ans := payloadSearch(t, f, srv, f32(q), 16)
	if len(rows) != 9 || !ans.Complete || ans.Count != 9 || ans.Uncertain != 0 || len(ans.Records) != 9 {
		t.Fatalf("brute force %d; complete %v count %d uncertain %d records %d", len(rows), ans.Complete, ans.Count, ans.Uncertain, len(ans.Records))
	}
	for i, r := range ans.Records {
		if r.Position != positions[i] || !reflect.DeepEqual(r.Payload, rows[i]) {
			t.Fatalf("record %d is %d %v, brute force %d %v", i, r.Position, r.Payload, positions[i], rows[i])
		}
	}
}
