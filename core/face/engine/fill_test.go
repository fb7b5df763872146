package engine

import (
	"math/rand"
	"testing"

	"encmatch/core/base/params"
	"encmatch/core/face/strategy"
)

// TestFilledGroupsSearchExactly appends a few entries at a time to a
// partial group, by the public-key enroller and by the key owner in turn
// (each append fills the group: whole, then seeded under a fresh seed),
// and searches the one group in memory and streamed: every decision
// outside the band equals brute force, the planted matches among the
// appended entries included, at their global positions.
func TestFilledGroupsSearchExactly(t *testing.T) {
	rng := rand.New(rand.NewSource(21))
	const dim, delta = 24, 0.5
	f := newFixtureWith(t, params.Toy, 8, dim, delta, strategy.BSGSTBE, 8)
	q := randomUnit(rng, dim)
	gal := gallery(rng, q, 600, nil)
	var tail [][]float32
	for _, c := range []float64{0.9, 0.55, 0.51, 0.49, 1.0, 0.45, 0.6, 0.3} {
		tail = append(tail, f32(atCosine(rng, q, c)))
	}
	for i := 0; i < 40; i++ {
		tail = append(tail, f32(randomUnit(rng, dim)))
	}
	f.enroll(t, gal)
	f.enrollSeeded(t, tail[:3]) // 0.9, 0.55, 0.51
	f.enroll(t, tail[3:5])      // 0.49, 1.0
	f.enrollSeeded(t, tail[5:]) // 0.45, 0.6, ...
	gal = append(gal, tail...)
	for _, streamed := range []bool{false, true} {
		srv := f.open(t, streamed)
		if g := srv.Manifest.Groups; len(g) != 1 || g[0].Count != len(gal) || g[0].Fills != 3 || !g[0].Seeded || srv.Streamed != streamed {
			t.Fatalf("groups %+v streamed %v", g, srv.Streamed)
		}
		m := check(t, f, srv, gal, f32(q))
		want := map[int]bool{600: true, 601: true, 604: true, 606: true} // 0.9, 0.55, 1.0, 0.6 (0.51 may lie in the band)
		found := 0
		for _, p := range m {
			if want[p] {
				found++
			}
		}
		if found != len(want) {
			t.Fatalf("streamed=%v: matches %v, want the appended %v", streamed, m, want)
		}
		check(t, f, srv, gal, f32(randomUnit(rng, dim)))
	}
}

// TestFilledGroupCrowdedAtTheThreshold fills one group in six appends,
// alternating the two enrollers, with 240 entries whose scores crowd delta
// (spread over delta +- 0.03, at the default kappa, whose band of +-0.0076
// holds about a quarter of them) among random ones, and checks both modes
// against brute force after each append: fills add encryption noise, and
// near delta is where it would show.
func TestFilledGroupCrowdedAtTheThreshold(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	const dim, delta = 24, 0.5
	f := newFixtureWith(t, params.Toy, params.DefaultKappa, dim, delta, strategy.BSGSTBE, 8)
	q := randomUnit(rng, dim)
	gal := gallery(rng, q, 100, nil)
	f.enroll(t, gal)
	for step := 0; step < 6; step++ {
		var batch [][]float32
		for i := 0; i < 40; i++ {
			batch = append(batch, f32(atCosine(rng, q, delta-0.03+0.06*rng.Float64())))
		}
		for i := 0; i < 10; i++ {
			batch = append(batch, f32(randomUnit(rng, dim)))
		}
		if step%2 == 0 {
			f.enrollSeeded(t, batch)
		} else {
			f.enroll(t, batch)
		}
		gal = append(gal, batch...)
		srv, err := Open(f.indexDir, f.serverKeys(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if g := srv.Manifest.Groups; len(g) != 1 || g[0].Count != len(gal) || g[0].Fills != step+1 {
			t.Fatalf("append %d: groups %+v", step, g)
		}
		check(t, f, srv, gal, f32(q))
	}
}
