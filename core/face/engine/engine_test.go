package engine

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"encmatch/core/base/errs"
	"encmatch/core/base/parallel"
	"encmatch/core/base/params"
	"encmatch/core/face/client"
	"encmatch/core/face/index"
	"encmatch/core/face/keys"
	"encmatch/core/face/result"
	"encmatch/core/face/strategy"
)

// fixture is a key set and an index in a temporary directory.
type fixture struct {
	keyDir, indexDir string
	set              *params.Set
	client           *client.Client
}

func newFixture(t *testing.T, preset string, kappa, dim int, delta float64) *fixture {
	return newFixtureWith(t, preset, kappa, dim, delta, strategy.DG, 0)
}

func newFixtureWith(t *testing.T, preset string, kappa, dim int, delta float64, name string, n1 int) *fixture {
	t.Helper()
	set, err := params.New(preset, kappa, dim)
	if err != nil {
		t.Fatal(err)
	}
	return newFixtureOf(t, set, name, n1, delta, index.CreateOptions{})
}

// newFixtureOf generates keys of set for strategy name (n1) and creates an
// index at delta with opt.
func newFixtureOf(t *testing.T, set *params.Set, name string, n1 int, delta float64, opt index.CreateOptions) *fixture {
	t.Helper()
	strat, err := strategy.New(name, n1, set.L())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f := &fixture{keyDir: filepath.Join(dir, "keys"), indexDir: filepath.Join(dir, "index"), set: set}
	if _, err := keys.Generate(f.keyDir, set, strat); err != nil {
		t.Fatal(err)
	}
	if _, err := index.Create(f.indexDir, f.serverKeys(), delta, opt); err != nil {
		t.Fatal(err)
	}
	if f.client, err = client.Open(f.keyDir); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) serverKeys() string { return filepath.Join(f.keyDir, keys.ServerDir) }

// open opens a server of the whole index, holding its groups in memory or,
// with streamed, under a budget nothing fits: every group streamed from
// disk per query.
func (f *fixture) open(t *testing.T, streamed bool) *Server {
	t.Helper()
	opt := Options{}
	if streamed {
		opt.MemoryBudget = 1
	}
	srv, err := Open(f.indexDir, f.serverKeys(), opt)
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// enroll encrypts vecs under the public key.
func (f *fixture) enroll(t *testing.T, vecs [][]float32) {
	t.Helper()
	pub, err := keys.LoadPublic(f.serverKeys())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := index.Enroll(f.indexDir, pub, flatten(vecs), len(vecs), f.set.Dim, index.EnrollOptions{}); err != nil {
		t.Fatal(err)
	}
}

// enrollSeeded encrypts vecs as the key owner (secret key, seeded halves).
func (f *fixture) enrollSeeded(t *testing.T, vecs [][]float32) {
	t.Helper()
	owner, err := keys.LoadClient(f.keyDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := index.EnrollSeeded(f.indexDir, owner, flatten(vecs), len(vecs), f.set.Dim, index.EnrollOptions{}); err != nil {
		t.Fatal(err)
	}
}

// enrollNewGroup encrypts vecs into new groups, even when the last group has
// room (the tests that need several groups).
func (f *fixture) enrollNewGroup(t *testing.T, vecs [][]float32, seededStore bool) {
	t.Helper()
	f.enrollAs(t, vecs, seededStore, index.EnrollOptions{NewGroups: true})
}

// enrollAs encrypts vecs with opt, as the key owner (secret key, seeded
// halves) or under the public key.
func (f *fixture) enrollAs(t *testing.T, vecs [][]float32, seededStore bool, opt index.EnrollOptions) {
	t.Helper()
	var err error
	if seededStore {
		owner, lerr := keys.LoadClient(f.keyDir)
		if lerr != nil {
			t.Fatal(lerr)
		}
		_, err = index.EnrollSeeded(f.indexDir, owner, flatten(vecs), len(vecs), f.set.Dim, opt)
	} else {
		pub, lerr := keys.LoadPublic(f.serverKeys())
		if lerr != nil {
			t.Fatal(lerr)
		}
		_, err = index.Enroll(f.indexDir, pub, flatten(vecs), len(vecs), f.set.Dim, opt)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func flatten(vecs [][]float32) []float32 {
	flat := make([]float32, 0, len(vecs)*len(vecs[0]))
	for _, v := range vecs {
		flat = append(flat, v...)
	}
	return flat
}

func unit(v []float64) []float64 {
	var n float64
	for _, x := range v {
		n += x * x
	}
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = x / math.Sqrt(n)
	}
	return out
}

func randomUnit(rng *rand.Rand, dim int) []float64 {
	v := make([]float64, dim)
	for i := range v {
		v[i] = rng.NormFloat64()
	}
	return unit(v)
}

// atCosine returns a unit vector whose cosine with the unit vector q is c.
func atCosine(rng *rand.Rand, q []float64, c float64) []float64 {
	u := randomUnit(rng, len(q))
	var d float64
	for i := range q {
		d += u[i] * q[i]
	}
	for i := range u {
		u[i] -= d * q[i]
	}
	u = unit(u)
	out := make([]float64, len(q))
	for i := range q {
		out[i] = c*q[i] + math.Sqrt(1-c*c)*u[i]
	}
	return out
}

func f32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

func cosine(a, b []float32) float64 {
	var d, na, nb float64
	for i := range a {
		d += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return d / math.Sqrt(na*nb)
}

// gallery makes n random vectors plus entries planted at given cosines to q.
func gallery(rng *rand.Rand, q []float64, n int, planted []float64) [][]float32 {
	var out [][]float32
	for i := 0; i < n; i++ {
		out = append(out, f32(randomUnit(rng, len(q))))
	}
	for _, c := range planted {
		out = append(out, f32(atCosine(rng, q, c)))
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// check runs both modes and compares with the exact brute force: every entry
// outside the decision band must be decided exactly, and the membership
// count must lie within what the value band allows.
func check(t *testing.T, f *fixture, srv *Server, gal [][]float32, q []float32) (matches []int) {
	t.Helper()
	qb, err := f.client.EncryptQuery(q)
	if err != nil {
		t.Fatal(err)
	}
	return checkQuery(t, f, srv, gal, qb, func(g []float32) float64 { return cosine(q, g) })
}

// checkQuery is check for an encrypted query qb whose exact score against
// a gallery vector is score(vector).
func checkQuery(t *testing.T, f *fixture, srv *Server, gal [][]float32, qb []byte, score func([]float32) float64) (matches []int) {
	t.Helper()
	cmp, err := srv.Comparator() // at the index's delta, or moved by its rule
	if err != nil {
		t.Fatal(err)
	}
	var exact []int
	lo, hi := 0, 0
	for i, g := range gal {
		s := score(g)
		if s >= cmp.Delta {
			exact = append(exact, i)
		}
		if s >= cmp.Delta+cmp.ValueBand {
			lo++
		}
		if s >= cmp.Delta-cmp.ValueBand {
			hi++
		}
	}
	resID, _, err := srv.Search(qb, result.Identification, SearchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	id, err := f.client.Decrypt(resID)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int]bool{}
	for _, m := range id.Matches {
		got[m] = true
	}
	for i, g := range gal {
		s := score(g)
		if math.Abs(s-cmp.Delta) > cmp.DecisionBand && got[i] != (s >= cmp.Delta) {
			t.Errorf("entry %d with score %.5f (delta %.3f, band %.1e): encrypted says %v", i, s, cmp.Delta, cmp.DecisionBand, got[i])
		}
	}
	resM, _, err := srv.Search(qb, result.Membership, SearchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mem, err := f.client.Decrypt(resM)
	if err != nil {
		t.Fatal(err)
	}
	if mem.RawCount < float64(lo)-0.5 || mem.RawCount > float64(hi)+0.5 {
		t.Errorf("membership count %.4f outside [%d, %d] (exact %d)", mem.RawCount, lo, hi, len(exact))
	}
	sort.Ints(id.Matches)
	return id.Matches
}

func TestEndToEndToyNearThreshold(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	const dim, delta = 24, 0.5
	f := newFixture(t, params.Toy, 8, dim, delta)
	q := randomUnit(rng, dim)
	// Planted scores straddle delta closely; two groups (2048 slots each).
	planted := []float64{0.52, 0.505, 0.502, 0.498, 0.495, 0.48, 0.9, 1.0, 0.3}
	gal := gallery(rng, q, 2500, planted)
	f.enroll(t, gal[:1000])
	f.enrollSeeded(t, gal[1000:]) // the owner fills the public-key group (now seeded), then a second group
	srv, err := Open(f.indexDir, f.serverKeys(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if g := srv.Manifest.Groups; len(g) != 2 || srv.Manifest.Count != len(gal) || !g[0].Seeded || g[0].Fills != 1 || g[0].Count != f.set.Slots() || !g[1].Seeded {
		t.Fatalf("groups %+v count %d", srv.Manifest.Groups, srv.Manifest.Count)
	}
	m := check(t, f, srv, gal, f32(q))
	t.Logf("matches: %v", m)
	if len(m) < 4 {
		t.Fatalf("expected the planted matches, got %v", m)
	}
	// A non-enrolled query.
	check(t, f, srv, gal, f32(randomUnit(rng, dim)))
}

// TestEndToEndRealRing runs the conjugate-invariant presets' toy (4,096
// real slots per group) through both enrollments, in memory and streamed,
// with the default strategy and the full table: every decision outside the
// band equals brute force, near the threshold.
func TestEndToEndRealRing(t *testing.T) {
	const dim, delta = 24, 0.5
	for _, c := range []struct {
		name   string
		n1     int
		stream bool
	}{{strategy.BSGSTBE, 8, false}, {strategy.BSGSTBE, 8, true}, {strategy.DG, 0, false}} {
		rng := rand.New(rand.NewSource(13))
		f := newFixtureWith(t, params.ToyReal, 8, dim, delta, c.name, c.n1)
		if got := f.set.Slots(); got != 4096 {
			t.Fatalf("toy-real has %d slots, want 4096 (N real slots)", got)
		}
		q := randomUnit(rng, dim)
		gal := gallery(rng, q, 5000, []float64{0.52, 0.505, 0.502, 0.498, 0.495, 0.48, 0.9, 1.0})
		f.enroll(t, gal[:4500])       // a full group and a partial one
		f.enrollSeeded(t, gal[4500:]) // fills the partial one (seeded)
		srv := f.open(t, c.stream)
		if g := srv.Manifest.Groups; len(g) != 2 || g[0].Count != 4096 || g[1].Count != len(gal)-4096 || g[1].Fills != 1 || !g[1].Seeded {
			t.Fatalf("%s: groups %+v", c.name, srv.Manifest.Groups)
		}
		if m := check(t, f, srv, gal, f32(q)); len(m) < 4 {
			t.Fatalf("%s: expected the planted matches, got %v", c.name, m)
		}
		check(t, f, srv, gal, f32(randomUnit(rng, dim)))
	}
}

// TestStrategiesAgree runs every strategy (and a baby-step size that does
// not divide l), in memory and streamed, enrolled with the public key or
// seeded, on the same gallery and queries: identical decisions, all equal
// to brute force outside the guard band.
func TestStrategiesAgree(t *testing.T) {
	const dim, delta = 24, 0.5 // l = 32
	cases := []struct {
		name           string
		n1             int
		stream, seeded bool
	}{{strategy.DG, 0, false, false}, {strategy.DG, 0, true, true}, {strategy.BSGSDiagonal, 8, false, true},
		{strategy.BSGSDiagonal, 5, true, false}, {strategy.BSGSTBS, 4, false, true}, {strategy.BSGSTBE, 8, false, false},
		{strategy.BSGSTBE, 3, true, true}}
	var first []int
	for _, c := range cases {
		rng := rand.New(rand.NewSource(11)) // same gallery and query for every strategy
		q := randomUnit(rng, dim)
		gal := gallery(rng, q, 2100, []float64{0.51, 0.503, 0.497, 0.49, 0.8})
		f := newFixtureWith(t, params.Toy, 8, dim, delta, c.name, c.n1)
		if c.seeded {
			f.enrollSeeded(t, gal)
		} else {
			f.enroll(t, gal)
		}
		srv := f.open(t, c.stream)
		if srv.Streamed != c.stream {
			t.Fatalf("%s: streamed=%v", c.name, srv.Streamed)
		}
		m := check(t, f, srv, gal, f32(q))
		if first == nil {
			first = m
			if len(m) < 3 {
				t.Fatalf("planted matches missing: %v", m)
			}
		} else if fmt.Sprint(m) != fmt.Sprint(first) {
			t.Errorf("%s n1=%d stream=%v seeded=%v: matches %v, dg found %v", c.name, c.n1, c.stream, c.seeded, m, first)
		}
		if c.name == strategy.BSGSTBS {
			if _, err := Open(f.indexDir, f.serverKeys(), Options{MemoryBudget: 1}); !errors.Is(err, errs.ErrInvalid) {
				t.Errorf("bsgs-tbs accepted to stream: %v", err)
			}
		}
	}
}

// TestBudgetBelowTheStreamingWindowWarns: a budget that holds the keys and
// the streaming window but not the groups streams quietly; one below the
// keys and the window streams and says the server will use more.
func TestBudgetBelowTheStreamingWindowWarns(t *testing.T) {
	rng := rand.New(rand.NewSource(44))
	const dim = 32
	f := newFixtureWith(t, params.Toy, params.MinKappa, dim, 0.5, strategy.BSGSTBE, 2)
	f.enroll(t, gallery(rng, randomUnit(rng, dim), 300, nil))
	probe := f.open(t, false)
	need := probe.strat.StreamingMemory(int64(probe.keys.Keys.BinarySize()), probe.ciphertextBytes(probe.Params.CKKS.MaxLevel()), parallel.Workers())
	if resident := probe.residentBytes(probe.keys); resident <= need {
		t.Fatalf("the fixture's groups (%d B with the keys) fit in its streaming window (%d B): no budget streams quietly", resident, need)
	}
	for _, c := range []struct {
		budget int64
		warns  bool
	}{{need, false}, {need - 1, true}, {1, true}} {
		srv, err := Open(f.indexDir, f.serverKeys(), Options{MemoryBudget: c.budget})
		if err != nil {
			t.Fatal(err)
		}
		if !srv.Streamed {
			t.Fatalf("budget %d B: not streamed", c.budget)
		}
		if got := len(srv.Warnings) > 0; got != c.warns {
			t.Errorf("budget %d B (streaming needs %d B): warnings %q", c.budget, need, srv.Warnings)
		}
	}
}

func TestStreamedCorruptionFailsTheQuery(t *testing.T) {
	rng := rand.New(rand.NewSource(12))
	f := newFixtureWith(t, params.Toy, params.MinKappa, 8, 0.5, strategy.BSGSTBE, 2)
	f.enroll(t, gallery(rng, randomUnit(rng, 8), 30, nil))
	srv, err := Open(f.indexDir, f.serverKeys(), Options{MemoryBudget: 1})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(f.indexDir, "group-000000.ct")
	data, _ := os.ReadFile(path)
	q, _ := f.client.EncryptQuery(f32(randomUnit(rng, 8)))
	flipped := append([]byte(nil), data...)
	flipped[len(data)/2] ^= 1
	for name, bad := range map[string][]byte{"flipped bit": flipped, "truncated": data[:len(data)/2]} {
		os.WriteFile(path, bad, 0o644)
		if _, _, err := srv.Search(q, result.Identification, SearchOptions{}); !errors.Is(err, errs.ErrCorrupt) {
			t.Errorf("%s: a corrupted streamed group gave %v, want ErrCorrupt", name, err)
		}
	}
}

// TestEndToEndSecureSmallDim runs dg and the BSGS strategies (bsgs-tbe on a
// seeded store) at the secure parameters (N = 2^15) on the same gallery:
// identical matches, equal to brute force outside the guard band.
func TestEndToEndSecureSmallDim(t *testing.T) {
	if testing.Short() {
		t.Skip("secure parameters in -short mode")
	}
	const dim = 8
	var first []int
	for _, c := range []struct {
		name string
		n1   int
	}{{strategy.DG, 0}, {strategy.BSGSTBE, 2}, {strategy.BSGSDiagonal, 4}} {
		rng := rand.New(rand.NewSource(8))
		q := randomUnit(rng, dim)
		gal := gallery(rng, q, 300, []float64{0.61, 0.59, 0.7, 0.605})
		f := newFixtureWith(t, params.Default, params.DefaultKappa, dim, 0.6, c.name, c.n1)
		if c.name == strategy.BSGSTBE {
			f.enrollSeeded(t, gal) // the key owner's seeded store at N = 2^15
		} else {
			f.enroll(t, gal)
		}
		srv, err := Open(f.indexDir, f.serverKeys(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		m := check(t, f, srv, gal, f32(q))
		if first == nil {
			first = m
		} else if fmt.Sprint(m) != fmt.Sprint(first) {
			t.Errorf("%s: matches %v, dg found %v", c.name, m, first)
		}
	}
}

func TestRefusesForeignKeysAndBadQueries(t *testing.T) {
	rng := rand.New(rand.NewSource(9))
	f := newFixture(t, params.Toy, params.MinKappa, 8, 0.5)
	f.enroll(t, gallery(rng, randomUnit(rng, 8), 20, nil))
	other := newFixture(t, params.Toy, params.MinKappa, 8, 0.5)
	if _, err := Open(f.indexDir, other.serverKeys(), Options{}); !errors.Is(err, errs.ErrMismatch) {
		t.Fatalf("index opened with another key set: %v", err)
	}
	otherParams := newFixture(t, params.Toy, params.MinKappa, 16, 0.5)
	if _, err := Open(f.indexDir, otherParams.serverKeys(), Options{}); !errors.Is(err, errs.ErrMismatch) {
		t.Fatalf("index opened with keys of other parameters: %v", err)
	}
	srv, err := Open(f.indexDir, f.serverKeys(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	foreign, _ := other.client.EncryptQuery(f32(randomUnit(rng, 8)))
	if _, _, err := srv.Search(foreign, result.Membership, SearchOptions{}); !errors.Is(err, errs.ErrMismatch) {
		t.Fatalf("query of another key set accepted: %v", err)
	}
	good, _ := f.client.EncryptQuery(f32(randomUnit(rng, 8)))
	for _, n := range []int{0, 10, len(good) / 2, len(good) - 1} {
		if _, _, err := srv.Search(good[:n], result.Membership, SearchOptions{}); !errors.Is(err, errs.ErrCorrupt) {
			t.Fatalf("query truncated to %d bytes: %v", n, err)
		}
	}
	if _, _, err := srv.Search(good, "everything", SearchOptions{}); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("bad mode: %v", err)
	}
	res, _, err := srv.Search(good, result.Identification, SearchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.client.Decrypt(res); !errors.Is(err, errs.ErrMismatch) {
		t.Fatalf("result decrypted by another key set: %v", err)
	}
	res[len(res)/2] ^= 1
	if _, err := f.client.Decrypt(res); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("corrupt result accepted: %v", err)
	}
}

func TestCorruptGroupFileIsReported(t *testing.T) {
	rng := rand.New(rand.NewSource(10))
	f := newFixture(t, params.Toy, params.MinKappa, 8, 0.5)
	f.enroll(t, gallery(rng, randomUnit(rng, 8), 20, nil))
	path := filepath.Join(f.indexDir, "group-000000.ct")
	data, _ := os.ReadFile(path)
	os.WriteFile(path, data[:len(data)-1000], 0o644)
	if _, err := Open(f.indexDir, f.serverKeys(), Options{}); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("truncated group file: %v", err)
	}
	os.Remove(path)
	if _, err := Open(f.indexDir, f.serverKeys(), Options{}); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("missing group file: %v", err)
	}
}
