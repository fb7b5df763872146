package engine

import (
	"math"
	"math/rand"
	"slices"
	"testing"

	"encmatch/core/base/params"
	"encmatch/core/face/index"
	"encmatch/core/face/payload"
	"encmatch/core/face/result"
)

// plantedOffsets are the planted scores' distances from delta, each
// planted on both sides (issue 31): all outside the decision band, the
// first three inside the value band at kappa 13.
var plantedOffsets = []float64{1e-5, 1e-4, 1e-3, 0.01}

// checkRightOrFlagged searches q in every mode and checks the answers
// against brute force under the index's rule: identification equals it
// for every score outside the decision band, and flags exactly values
// that are not clean, only for scores inside the value band; membership
// is the plaintext model's sum, said to be approximate when not within
// the clean tolerance of an integer (values at delta +- d add up to 1, so
// symmetric plantings can sum to an integer); payload returns only true matches,
// every one outside the value band, and is complete only when nothing
// was uncertain.
func checkRightOrFlagged(t *testing.T, f *fixture, gal [][]float32, pay []int16, q []float32) {
	t.Helper()
	srv, err := Open(f.indexDir, f.serverKeys(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := srv.Manifest
	cmp, err := srv.Comparator()
	if err != nil {
		t.Fatal(err)
	}
	if cmp.Delta != m.Delta {
		t.Fatalf("rule %q: the comparator is built for %v, the index's delta is %v", m.Rule, cmp.Delta, m.Delta)
	}
	var want, inBand []int
	model := 0.0
	for i, g := range gal {
		s := cosine(q, g)
		if math.Abs(s-m.Delta) <= cmp.DecisionBand {
			t.Fatalf("entry %d scores %v, within the decision band of delta", i, s)
		}
		if m.Matches(s) {
			want = append(want, i)
		}
		if math.Abs(s-m.Delta) < cmp.ValueBand {
			inBand = append(inBand, i)
		}
		model += cmp.Model(s)
	}
	qb, err := f.client.EncryptQuery(q)
	if err != nil {
		t.Fatal(err)
	}
	answer := func(mode result.Mode) *result.Answer {
		res, _, err := srv.Search(qb, mode, SearchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		a, err := f.client.Decrypt(res)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	id := answer(result.Identification)
	if !slices.Equal(id.Matches, want) {
		t.Fatalf("rule %q: identification %v, brute force %v", m.Rule, id.Matches, want)
	}
	for _, p := range id.UncertainPositions {
		if !slices.Contains(inBand, p) {
			t.Fatalf("rule %q: entry %d (score %v) flagged uncertain outside the value band", m.Rule, p, cosine(q, gal[p]))
		}
	}
	if len(id.UncertainPositions) == 0 {
		t.Fatalf("rule %q: no entry flagged, with %d scores within 1e-3 of delta", m.Rule, 4)
	}
	mem := answer(result.Membership)
	if math.Abs(mem.RawCount-model) > 1e-3 || mem.Approximate != (math.Abs(mem.RawCount-math.Round(mem.RawCount)) > result.CleanTolerance) {
		t.Fatalf("rule %q: membership %.6f (approximate %v), the model's sum %.6f", m.Rule, mem.RawCount, mem.Approximate, model)
	}
	if math.Abs(model-math.Round(model)) > 2*result.CleanTolerance && !mem.Approximate {
		t.Fatalf("rule %q: membership %.6f not flagged approximate (the model's sum %.6f)", m.Rule, mem.RawCount, model)
	}
	if pay == nil {
		return
	}
	ans := payloadSearch(t, f, srv, q, 32)
	for _, r := range ans.Records {
		if !slices.Contains(want, r.Position) {
			t.Fatalf("rule %q: payload returned entry %d, not a match", m.Rule, r.Position)
		}
		w := m.PayloadWidth
		if !slices.Equal(r.Payload, pay[r.Position*w:(r.Position+1)*w]) {
			t.Fatalf("rule %q: entry %d's payload %v, enrolled %v", m.Rule, r.Position, r.Payload, pay[r.Position*w:(r.Position+1)*w])
		}
	}
	for _, p := range want {
		if !slices.Contains(inBand, p) && !slices.ContainsFunc(ans.Records, func(r payload.Record) bool { return r.Position == p }) {
			t.Fatalf("rule %q: payload misses entry %d (score %v), outside the value band", m.Rule, p, cosine(q, gal[p]))
		}
	}
	if ans.Complete || ans.Uncertain == 0 {
		t.Fatalf("rule %q: payload complete %v, uncertain %d, with scores inside the value band", m.Rule, ans.Complete, ans.Uncertain)
	}
}

// plantedGallery is n random entries plus entries at each planted offset
// on both sides of delta, and extra scores.
func plantedGallery(rng *rand.Rand, q []float64, n int, delta float64, extra ...float64) [][]float32 {
	var planted []float64
	for _, d := range plantedOffsets {
		planted = append(planted, delta-d, delta+d)
	}
	return gallery(rng, q, n, append(planted, extra...))
}

// TestPlantedScoresAreRightOrFlagged (issue 31): scores at 1e-5, 1e-4, 1e-3
// and 0.01 on both sides of delta, without a rule and with each rule, in
// every mode, at the toy preset.
func TestPlantedScoresAreRightOrFlagged(t *testing.T) {
	const dim, delta, width = 64, 0.5, 2
	for i, rule := range []string{"", index.RuleAtLeast, index.RuleAbove} {
		rng := rand.New(rand.NewSource(int64(40 + i)))
		q := randomUnit(rng, dim)
		gal := plantedGallery(rng, q, 500, delta, 0.6, 0.7, 0.3)
		pay := randomPayloads(rng, len(gal), width)
		f := newPayloadFixture(t, params.Toy, 13, dim, 8, delta, width, rule)
		f.enrollPayloads(t, gal, pay, true)
		checkRightOrFlagged(t, f, gal, pay, f32(q))
	}
}

// TestTwentyMatchesJustAboveDelta (issue 31): twenty matches in
// (delta, delta + 0.0006] under rule ">", the case that once came back as
// a clean payload count of 0: every one is identified, the payload answer
// is flagged incomplete, the count approximate.
func TestTwentyMatchesJustAboveDelta(t *testing.T) {
	const dim, delta, width = 64, 0.8, 2
	rng := rand.New(rand.NewSource(45))
	q := randomUnit(rng, dim)
	var near []float64
	for range 20 {
		near = append(near, delta+1e-5+rng.Float64()*0.00059)
	}
	gal := gallery(rng, q, 300, append(near, 0.9, 0.95))
	pay := randomPayloads(rng, len(gal), width)
	f := newPayloadFixture(t, params.Toy, 13, dim, 8, delta, width, index.RuleAbove)
	f.enrollPayloads(t, gal, pay, true)
	checkRightOrFlagged(t, f, gal, pay, f32(q))
}

// TestPlantedScoresSecure: the planted scores once at the 128-bit preset
// (rule ">", a small dimension, every mode).
func TestPlantedScoresSecure(t *testing.T) {
	const dim, delta, width = 32, 0.5, 2
	rng := rand.New(rand.NewSource(46))
	q := randomUnit(rng, dim)
	gal := plantedGallery(rng, q, 300, delta, 0.7)
	pay := randomPayloads(rng, len(gal), width)
	f := newPayloadFixture(t, params.Default, params.DefaultKappa, dim, 8, delta, width, index.RuleAbove)
	f.enrollPayloads(t, gal, pay, true)
	checkRightOrFlagged(t, f, gal, pay, f32(q))
}
