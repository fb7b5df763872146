package engine

import (
	"errors"
	"math"
	"math/rand"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

	"encmatch/core/base/comparator"
	"encmatch/core/base/errs"
	"encmatch/core/base/params"
	"encmatch/core/face/index"
	"encmatch/core/face/keys"
	"encmatch/core/face/payload"
	"encmatch/core/face/result"
	"encmatch/core/face/strategy"
)

// newPayloadFixture is a key set of preset with the payload level
// (bsgs-tbe with n1) and an index of payloads of width values per record
// under rule.
func newPayloadFixture(t *testing.T, preset string, kappa, dim, n1 int, delta float64, width int, rule string) *fixture {
	t.Helper()
	set, err := params.NewWith(preset, kappa, dim, true)
	if err != nil {
		t.Fatal(err)
	}
	return newFixtureOf(t, set, strategy.BSGSTBE, n1, delta, index.CreateOptions{PayloadWidth: width, Rule: rule})
}

// enrollPayloads enrolls vecs and their payloads, by the key owner or
// under the public key (each fills the last group first).
func (f *fixture) enrollPayloads(t *testing.T, vecs [][]float32, pay []int16, owner bool) {
	t.Helper()
	f.enrollAs(t, vecs, owner, index.EnrollOptions{Payloads: pay})
}

// crowdOutsideTheBand gives above scores just above the comparator's value
// band at delta and below scores just below it, each at most spread
// beyond the band: scores whose every answer is clean.
func crowdOutsideTheBand(t *testing.T, rng *rand.Rand, kappa int, delta float64, above, below int, spread float64) []float64 {
	t.Helper()
	cmp, err := comparator.New(kappa, delta, comparator.DefaultScoreScale)
	if err != nil {
		t.Fatal(err)
	}
	var planted []float64
	for i := 0; i < above; i++ {
		planted = append(planted, delta+cmp.ValueBand+0.001+rng.Float64()*spread)
	}
	for i := 0; i < below; i++ {
		planted = append(planted, delta-cmp.ValueBand-0.001-rng.Float64()*spread)
	}
	return planted
}

// bruteForcePayloads is the workload's answer: the payloads of every
// record whose exact score passes the rule, sorted, and their positions.
func bruteForcePayloads(m *index.Manifest, gal [][]float32, pay []int16, q []float32) (rows [][]int16, positions []int) {
	w := m.PayloadWidth
	type rec struct {
		pos int
		p   []int16
	}
	var recs []rec
	for i, g := range gal {
		if m.Matches(cosine(q, g)) {
			recs = append(recs, rec{i, pay[i*w : (i+1)*w]})
		}
	}
	sort.Slice(recs, func(a, b int) bool {
		for k := range recs[a].p {
			if recs[a].p[k] != recs[b].p[k] {
				return recs[a].p[k] < recs[b].p[k]
			}
		}
		return recs[a].pos < recs[b].pos
	})
	rows = [][]int16{}
	for _, r := range recs {
		rows = append(rows, r.p)
		positions = append(positions, r.pos)
	}
	return rows, positions
}

func randomPayloads(rng *rand.Rand, n, width int) []int16 {
	out := make([]int16, n*width)
	for i := range out {
		out[i] = int16(rng.Intn(65536) - 32768)
	}
	out[0], out[1] = math.MaxInt16, math.MinInt16 // the extremes travel too
	return out
}

func payloadSearch(t *testing.T, f *fixture, srv *Server, q []float32, bound int) *result.Answer {
	t.Helper()
	qb, err := f.client.EncryptQuery(q)
	if err != nil {
		t.Fatal(err)
	}
	res, _, err := srv.Search(qb, result.Payload, SearchOptions{Bound: bound})
	if err != nil {
		t.Fatal(err)
	}
	ans, err := f.client.Decrypt(res)
	if err != nil {
		t.Fatal(err)
	}
	return ans
}

// TestPayloadSearchMatchesBruteForce: three groups (two full, one partial,
// enrolled in batches that fill the last group by both enrollers), 24
// matches just above the guard band of rule ">" (delta, delta + 2.1 value
// bands) and 300 non-matches just below delta, all within 0.05 of it: the decrypted
// payloads are exactly the brute-force ones, sorted, in memory and
// streamed; membership and identification still answer on the same index.
func TestPayloadSearchMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewSource(18))
	const dim, delta, width = 64, 0.5, 7
	f := newPayloadFixture(t, params.Toy, 13, dim, 8, delta, width, index.RuleAbove)
	q := randomUnit(rng, dim)
	gal := gallery(rng, q, 4700, crowdOutsideTheBand(t, rng, 13, delta, 24, 300, 0.03))
	pay := randomPayloads(rng, len(gal), width)
	f.enrollPayloads(t, gal[:1500], pay[:1500*width], false)
	f.enrollPayloads(t, gal[1500:3000], pay[1500*width:3000*width], true) // fills group 0, starts group 1
	f.enrollPayloads(t, gal[3000:], pay[3000*width:], false)              // fills group 1, starts group 2
	for _, streamed := range []bool{false, true} {
		srv := f.open(t, streamed)
		if g := srv.Manifest.Groups; len(g) != 3 || g[0].Fills != 1 || g[1].Fills != 1 || srv.Streamed != streamed {
			t.Fatalf("groups %+v", g)
		}
		rows, positions := bruteForcePayloads(srv.Manifest, gal, pay, f32(q))
		if len(rows) != 24 {
			t.Fatalf("brute force finds %d matches, planted 24", len(rows))
		}
		ans := payloadSearch(t, f, srv, f32(q), 32)
		if !ans.Complete || ans.Count != 24 || ans.Uncertain != 0 || len(ans.Records) != 24 {
			t.Fatalf("streamed=%v: complete %v count %d (raw %.4f) uncertain %d records %d", streamed, ans.Complete, ans.Count, ans.RawCount, ans.Uncertain, len(ans.Records))
		}
		for i, r := range ans.Records {
			if r.Position != positions[i] || !reflect.DeepEqual(r.Payload, rows[i]) {
				t.Fatalf("streamed=%v: record %d is %d %v, brute force %d %v", streamed, i, r.Position, r.Payload, positions[i], rows[i])
			}
		}
		// The other modes on a chain with the payload level.
		if m := check(t, f, srv, gal, f32(q)); len(m) != 24 {
			t.Fatalf("identification found %d matches", len(m))
		}
		// More matches than the bound: the exact count, marked incomplete.
		over := payloadSearch(t, f, srv, f32(q), 8)
		if over.Complete || over.Count != 24 {
			t.Fatalf("bound 8: complete %v count %d", over.Complete, over.Count)
		}
		for _, r := range over.Records {
			if k := sort.SearchInts(sortedCopy(positions), r.Position); k == len(positions) || sortedCopy(positions)[k] != r.Position {
				t.Fatalf("bound 8: decoded a non-match at %d", r.Position)
			}
		}
	}
}

func sortedCopy(v []int) []int {
	out := append([]int(nil), v...)
	sort.Ints(out)
	return out
}

// TestExactTieIsFlagged: delta is set to the exact score of one record
// (its float32 vectors' cosine). Whatever the rule, the comparator's
// transition is centred at delta, so the tie decrypts to a value that is
// not clean: identification reports it uncertain, payload leaves its cell
// uncertain and the answer incomplete, membership says its count is
// approximate; every other record is answered exactly.
func TestExactTieIsFlagged(t *testing.T) {
	rng := rand.New(rand.NewSource(19))
	const dim, width = 64, 2 // no random record within 0.05 of delta
	q := f32(randomUnit(rng, dim))
	gal := gallery(rng, randomUnit(rng, dim), 300, nil)
	tie := f32(atCosine(rng, unit(float64s(q)), 0.6))
	gal = append(gal, tie)
	delta := cosine(q, tie)
	for i, g := range gal[:len(gal)-1] {
		if math.Abs(cosine(q, g)-delta) < 0.05 {
			t.Fatalf("record %d scores %.4f, within the guard band of delta %.4f", i, cosine(q, g), delta)
		}
	}
	pay := randomPayloads(rng, len(gal), width)
	for _, rule := range []string{"", index.RuleAtLeast, index.RuleAbove} {
		f := newPayloadFixture(t, params.Toy, 13, dim, 8, delta, width, rule)
		f.enrollPayloads(t, gal, pay, true)
		srv, err := Open(f.indexDir, f.serverKeys(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		rows, _ := bruteForcePayloads(srv.Manifest, gal, pay, q)
		others := len(rows)
		if rule != index.RuleAbove {
			others-- // the tie itself
		}
		ans := payloadSearch(t, f, srv, q, 32)
		if ans.Complete || ans.Uncertain < 1 || len(ans.Records) != others {
			t.Fatalf("rule %q: payload complete %v, uncertain %d, %d records (want incomplete, the tie uncertain, %d records)",
				rule, ans.Complete, ans.Uncertain, len(ans.Records), others)
		}
		qb, _ := f.client.EncryptQuery(q)
		for _, mode := range []result.Mode{result.Identification, result.Membership} {
			res, _, err := srv.Search(qb, mode, SearchOptions{})
			if err != nil {
				t.Fatal(err)
			}
			a, err := f.client.Decrypt(res)
			if err != nil {
				t.Fatal(err)
			}
			tiePos := len(gal) - 1
			switch mode {
			case result.Identification:
				if !reflect.DeepEqual(a.UncertainPositions, []int{tiePos}) || a.Uncertain != 1 {
					t.Fatalf("rule %q: uncertain positions %v, want [%d]", rule, a.UncertainPositions, tiePos)
				}
				var got []int
				for _, m := range a.Matches {
					if m != tiePos {
						got = append(got, m)
					}
				}
				if len(got) != others {
					t.Fatalf("rule %q: %d clean matches, brute force %d", rule, len(got), others)
				}
			case result.Membership:
				if !a.Approximate || math.Abs(a.RawCount-float64(others)-0.5) > 0.5-result.CleanTolerance {
					t.Fatalf("rule %q: membership count %.5f (approximate %v), want %d plus a fraction", rule, a.RawCount, a.Approximate, others)
				}
			}
		}
	}
}

func float64s(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// TestPayloadInputsRefused: payload mode on an index without payloads,
// payloads for an index without them, the wrong number of them, a payload
// index on keys without the payload level, and an unknown rule.
func TestPayloadInputsRefused(t *testing.T) {
	rng := rand.New(rand.NewSource(20))
	plain := newFixture(t, params.Toy, 8, 8, 0.5)
	vecs := gallery(rng, randomUnit(rng, 8), 4, nil)
	plain.enroll(t, vecs)
	srv, err := Open(plain.indexDir, plain.serverKeys(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	qb, _ := plain.client.EncryptQuery(vecs[0])
	if _, _, err := srv.Search(qb, result.Payload, SearchOptions{}); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("payload search of an index without payloads: %v", err)
	}
	pub, _ := keys.LoadPublic(plain.serverKeys())
	if _, err := index.Enroll(plain.indexDir, pub, flatten(vecs), 4, 8, index.EnrollOptions{Payloads: make([]int16, 4)}); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("payloads for an index without them: %v", err)
	}
	if _, err := index.Create(filepath.Join(t.TempDir(), "p"), plain.serverKeys(), 0.5, index.CreateOptions{PayloadWidth: 3}); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("a payload index on keys without the payload level: %v", err)
	}
	f := newPayloadFixture(t, params.Toy, 8, 8, 8, 0.5, 3, "")
	if _, err := index.Create(filepath.Join(t.TempDir(), "r"), f.serverKeys(), 0.5, index.CreateOptions{Rule: "=>"}); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("rule =>: %v", err)
	}
	pub, _ = keys.LoadPublic(f.serverKeys())
	for _, n := range []int{0, 11, 13} {
		if _, err := index.Enroll(f.indexDir, pub, flatten(vecs), 4, 8, index.EnrollOptions{Payloads: make([]int16, n)}); !errors.Is(err, errs.ErrInvalid) {
			t.Fatalf("%d payload values for 4 records of 3: %v", n, err)
		}
	}
	if _, err := index.Enroll(f.indexDir, pub, flatten(vecs), 4, 8, index.EnrollOptions{Payloads: make([]int16, 12)}); err != nil {
		t.Fatal(err)
	}
	srv, err = Open(f.indexDir, f.serverKeys(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	qb, _ = f.client.EncryptQuery(vecs[0])
	if _, _, err := srv.Search(qb, result.Payload, SearchOptions{Bound: payload.MaxBound + 1}); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("bound above the maximum: %v", err)
	}
}

// TestPayloadShardsMerge: two shards of a three-group payload index (one
// streamed) answer with results laid out for the whole index; merged (cell
// ciphertexts added), they decode to the unsharded answer; one shard alone
// is refused as incomplete.
func TestPayloadShardsMerge(t *testing.T) {
	rng := rand.New(rand.NewSource(23))
	const dim, delta, width = 64, 0.6, 3 // no random record near delta
	f := newPayloadFixture(t, params.Toy, 13, dim, 8, delta, width, index.RuleAbove)
	q := randomUnit(rng, dim)
	gal := gallery(rng, q, 4500, []float64{0.9, 0.8, 0.75, 0.7, 0.95, 1.0, 0.85})
	pay := randomPayloads(rng, len(gal), width)
	f.enrollPayloads(t, gal, pay, true)
	full, shardA, shardB := f.openShards(t)
	want := payloadSearch(t, f, full, f32(q), 16)
	rows, _ := bruteForcePayloads(full.Manifest, gal, pay, f32(q))
	if !want.Complete || len(want.Records) != len(rows) {
		t.Fatalf("unsharded: %+v, brute force %d", want, len(rows))
	}
	qb, _ := f.client.EncryptQuery(f32(q))
	var parts []*result.Result
	for _, shard := range []*Server{shardA, shardB} {
		parts = append(parts, shardResult(t, shard, qb, result.Payload, SearchOptions{Bound: 16}))
	}
	got := mergeAndDecrypt(t, f, full, parts)
	if !reflect.DeepEqual(got.Records, want.Records) || got.Count != want.Count || !got.Complete {
		t.Fatalf("merged %+v, unsharded %+v", got, want)
	}
	one, _ := result.Marshal(full.Manifest.Header(""), parts[0])
	if _, err := f.client.Decrypt(one); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("one shard's payload result decrypted: %v", err)
	}
}

// TestPayloadAtTheSecurePreset: the same check at N = 2^15, kappa 13 (the
// default preset with the payload level; skipped with -short): 30 matches
// just above the guard band of ">" and 400 non-matches just below delta
// among 6,000 records of 128-d, both enrollers; payloads exactly brute
// force's, and the bound of 16 reported as exceeded with the exact count.
func TestPayloadAtTheSecurePreset(t *testing.T) {
	if testing.Short() {
		t.Skip("N = 2^15 keys and a group take about a minute")
	}
	rng := rand.New(rand.NewSource(2615))
	const dim, delta, width = 128, 0.5, 7
	f := newPayloadFixture(t, params.Default, params.DefaultKappa, dim, 16, delta, width, index.RuleAbove)
	q := randomUnit(rng, dim)
	gal := gallery(rng, q, 5570, crowdOutsideTheBand(t, rng, params.DefaultKappa, delta, 30, 400, 0.04))
	pay := randomPayloads(rng, len(gal), width)
	f.enrollPayloads(t, gal[:3000], pay[:3000*width], false)
	f.enrollPayloads(t, gal[3000:], pay[3000*width:], true) // the owner fills the public-key group
	srv, err := Open(f.indexDir, f.serverKeys(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	rows, positions := bruteForcePayloads(srv.Manifest, gal, pay, f32(q))
	ans := payloadSearch(t, f, srv, f32(q), 32)
	if len(rows) != 30 || !ans.Complete || ans.Count != 30 || len(ans.Records) != 30 {
		t.Fatalf("complete %v count %d (raw %.4f) records %d uncertain %d; brute force %d", ans.Complete, ans.Count, ans.RawCount, len(ans.Records), ans.Uncertain, len(rows))
	}
	for i, r := range ans.Records {
		if r.Position != positions[i] || !reflect.DeepEqual(r.Payload, rows[i]) {
			t.Fatalf("record %d is %d %v, brute force %d %v", i, r.Position, r.Payload, positions[i], rows[i])
		}
	}
	if over := payloadSearch(t, f, srv, f32(q), 16); over.Complete || over.Count != 30 {
		t.Fatalf("bound 16: complete %v count %d", over.Complete, over.Count)
	}
}

// TestPayloadAtTheBoundJustOutsideTheBand (issue 31, item 2): as many
// matches as the bound, every one just above the comparator's value band
// and 300 non-matches just below it: the payload answer is complete and
// equal to brute force, the count exact.
func TestPayloadAtTheBoundJustOutsideTheBand(t *testing.T) {
	rng := rand.New(rand.NewSource(47))
	const dim, delta, width, bound = 64, 0.5, 7, 32
	q := f32(randomUnit(rng, dim))
	gal := gallery(rng, unit(float64s(q)), 200, crowdOutsideTheBand(t, rng, 13, delta, bound, 300, 0.002))
	pay := randomPayloads(rng, len(gal), width)
	f := newPayloadFixture(t, params.Toy, 13, dim, 8, delta, width, index.RuleAbove)
	f.enrollPayloads(t, gal, pay, false)
	srv, err := Open(f.indexDir, f.serverKeys(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	rows, _ := bruteForcePayloads(srv.Manifest, gal, pay, q)
	ans := payloadSearch(t, f, srv, q, bound)
	got := [][]int16{}
	for _, r := range ans.Records {
		got = append(got, r.Payload)
	}
	if len(rows) != bound || !reflect.DeepEqual(got, rows) || !ans.Complete || ans.Count != bound || ans.Uncertain != 0 {
		t.Fatalf("%d matches: %d records decoded (complete %v, count %d, raw %.4f, uncertain %d)",
			len(rows), len(got), ans.Complete, ans.Count, ans.RawCount, ans.Uncertain)
	}
}
