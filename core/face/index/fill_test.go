package index

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"encmatch/core/base/errs"
	"encmatch/core/base/packing"
	"encmatch/core/base/params"
	"encmatch/core/face/keys"
	"encmatch/core/face/seeded"
	"encmatch/core/face/strategy"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// randomVectors are n distinct dimension-4 vectors (vectors() repeats).
func randomVectors(n, seed int) []float32 {
	out := make([]float32, 4*n)
	x := uint32(seed*7919 + 1)
	for i := range out {
		x = x*1664525 + 1013904223
		out[i] = float32(x>>8)/float32(1<<24) - 0.5
	}
	return out
}

// decryptError decrypts every diagonal of group g and returns the largest
// distance, over all slots, to the diagonals of the plaintext vectors all
// (of dimension dim; normalised, packed and pre-rotated as the enroller
// does): zero in the free slots.
func decryptError(t *testing.T, idx string, owner *keys.Client, g Group, all []float32, dim int) float64 {
	t.Helper()
	m, err := Load(idx)
	if err != nil {
		t.Fatal(err)
	}
	set := owner.Params
	cts, err := LoadGroup(idx, m, set, g)
	if err != nil {
		t.Fatal(err)
	}
	l, slots := set.L(), set.Slots()
	var vecs [][]float64
	for i := g.Start; i < g.Start+g.Count; i++ {
		v, err := packing.Normalize(all[i*dim:(i+1)*dim], dim, l, i)
		if err != nil {
			t.Fatal(err)
		}
		vecs = append(vecs, v)
	}
	diags, err := packing.Diagonals(vecs, l, slots, m.ScoreScale)
	if err != nil {
		t.Fatal(err)
	}
	strat, _ := m.SimilarityStrategy()
	p := set.CKKS
	dec, ecd := rlwe.NewDecryptor(p, owner.Secret), ckks.NewEncoder(p)
	worst := 0.0
	for i, ct := range cts {
		want := diags[i]
		if strat.PreRotatedByEnroller() {
			want = packing.Rotate(want, strat.PreRotation(i))
		}
		got := make([]float64, slots)
		if err := ecd.Decode(dec.DecryptNew(ct), got); err != nil {
			t.Fatal(err)
		}
		for j := range got {
			worst = math.Max(worst, math.Abs(got[j]-want[j]))
		}
	}
	return worst
}

func ownerOf(t *testing.T, idx string) *keys.Client {
	t.Helper()
	owner, err := keys.LoadClient(filepath.Join(filepath.Dir(idx), "keys"))
	if err != nil {
		t.Fatal(err)
	}
	return owner
}

// TestAppendsFillTheLastGroup: small appends, by the public-key enroller
// and by the key owner in turn, land in the last group (one group, its file
// renamed at each fill, the replaced file removed), which decrypts to the
// diagonals of every vector enrolled so far with one more fresh-encryption
// noise per fill; the owner's fills are seeded (half the bytes), the
// public-key enroller's whole; an append that overflows fills the group and
// starts a new one.
func TestAppendsFillTheLastGroup(t *testing.T) {
	idx, pub := setup(t)
	owner := ownerOf(t, idx)
	slots := pub.Params.Slots()
	all := randomVectors(slots+40, 1)
	at := 0
	add := func(k int, asOwner bool) *EnrollSummary {
		t.Helper()
		var sum *EnrollSummary
		var err error
		if asOwner {
			sum, err = EnrollSeeded(idx, owner, all[at*4:(at+k)*4], k, 4, EnrollOptions{})
		} else {
			sum, err = Enroll(idx, pub, all[at*4:(at+k)*4], k, 4, EnrollOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
		at += k
		return sum
	}
	add(240, false)
	m, _ := Load(idx)
	fresh := decryptError(t, idx, owner, m.Groups[0], all, 4)
	whole := m.Groups[0].Bytes
	steps := []struct {
		k      int
		owner  bool
		seeded bool
	}{{3, false, false}, {1, true, true}, {5, true, true}, {2, false, false}, {7, true, true}}
	worst := fresh
	for n, s := range steps {
		sum := add(s.k, s.owner)
		m, err := Load(idx)
		if err != nil {
			t.Fatal(err)
		}
		g := m.Groups[0]
		if len(m.Groups) != 1 || g.Count != at || m.Count != at || g.Fills != n+1 || g.Seeded != s.seeded || g.File != groupFile(0, n+1) {
			t.Fatalf("after fill %d: groups %+v count %d", n+1, m.Groups, m.Count)
		}
		if sum.GroupsFilled != 1 || sum.GroupsNew != 0 || len(sum.Writes) != 1 || sum.Writes[0] != (GroupWrite{Group: 0, Filled: true, Added: s.k, Count: at, Bytes: g.Bytes, Seeded: s.seeded}) || sum.GroupSlots != slots {
			t.Fatalf("fill %d summary %+v", n+1, sum)
		}
		// (a filled file's kind names its fill and count: a few bytes more)
		if s.seeded && float64(g.Bytes) > 0.51*float64(whole) || !s.seeded && (g.Bytes < whole || g.Bytes > whole+64) {
			t.Fatalf("fill %d: %d bytes (a whole group is %d)", n+1, g.Bytes, whole)
		}
		if files, _ := filepath.Glob(filepath.Join(idx, "group-*")); len(files) != 1 {
			t.Fatalf("fill %d left %v", n+1, files)
		}
		e := decryptError(t, idx, owner, g, all, 4)
		t.Logf("fill %d (%d entries, %s): max error %.3g (fresh group %.3g)", n+1, s.k, map[bool]string{true: "owner, seeded", false: "public key, whole"}[s.owner], e, fresh)
		worst = math.Max(worst, e)
		// One fresh noise per fill: the error grows at most linearly.
		if e > float64(n+2)*fresh*1.5+1e-9 {
			t.Fatalf("fill %d: error %.3g, fresh %.3g", n+1, e, fresh)
		}
	}
	// Far below the comparator's decision band (0.0076 at kappa 13, wider at
	// smaller kappa): a score sums l products, each bounded by the error.
	if worst*float64(pub.Params.L()) > 1e-4 {
		t.Fatalf("error %.3g per slot", worst)
	}

	// An append larger than the room fills the group and starts a new one.
	room := slots - at
	sum := add(room+40, true)
	m, _ = Load(idx)
	if sum.GroupsFilled != 1 || sum.GroupsNew != 1 || len(m.Groups) != 2 || m.Groups[0].Count != slots || m.Groups[1].Count != 40 || m.Groups[1].Fills != 0 || m.Count != slots+40 {
		t.Fatalf("overflowing append: summary %+v groups %+v", sum, m.Groups)
	}
	if w := sum.Writes; w[0].Added != room || w[1].Added != 40 || w[1].Group != 1 {
		t.Fatalf("writes %+v", w)
	}
	for _, g := range m.Groups {
		if e := decryptError(t, idx, owner, g, all, 4); e > 8*fresh {
			t.Fatalf("group %d: error %.3g", g.Start, e)
		}
	}
}

// TestNewGroupsOption: the service's staging path, which holds no group
// file, starts a new group even when the last one has room.
func TestNewGroupsOption(t *testing.T) {
	idx, pub := setup(t)
	if _, err := Enroll(idx, pub, vectors(3), 3, 4, EnrollOptions{}); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(idx, groupFile(0, 0))) // as in a staging directory
	sum, err := Enroll(idx, pub, vectors(2), 2, 4, EnrollOptions{NewGroups: true})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := Load(idx)
	if len(m.Groups) != 2 || sum.GroupsNew != 1 || sum.GroupsFilled != 0 || m.Groups[1].Start != 3 {
		t.Fatalf("summary %+v groups %+v", sum, m.Groups)
	}
}

// TestFillCrashSafety simulates a crash between writing a filled group's
// file and the manifest naming it, then one between the manifest and the
// removal of the replaced file: the manifest stays consistent with the
// files it names, and the next enrollment removes what it does not name.
// A manifest that names a filled file with another count or fill number,
// or an older file under a filled group's name, is refused.
func TestFillCrashSafety(t *testing.T) {
	idx, pub := setup(t)
	owner := ownerOf(t, idx)
	all := randomVectors(20, 2)
	if _, err := EnrollSeeded(idx, owner, all[:3*4], 3, 4, EnrollOptions{}); err != nil {
		t.Fatal(err)
	}
	m, _ := Load(idx)
	before, _ := os.ReadFile(filepath.Join(idx, manifestFile))

	// Crash 1: the filled file is written, the manifest is not.
	vecs := make([][]float64, 2)
	for i := range vecs {
		vecs[i], _ = packing.Normalize(all[(3+i)*4:(4+i)*4], 4, pub.Params.Padded(), i)
	}
	strat, _ := m.SimilarityStrategy()
	ecd := ckks.NewEncoder(pub.Params.CKKS)
	pt := func(src groupPlain, i int) (*rlwe.Plaintext, error) {
		p := ckks.NewPlaintext(pub.Params.CKKS, pub.Params.CKKS.MaxLevel())
		return p, ecd.Encode(src.diagonal(i, strat.PreRotation(i)), p)
	}
	enc := rlwe.NewEncryptor(pub.Params.CKKS, pub.Key)
	g, err := fillGroup(idx, m, pub.Params, 0, vecs, nil, func() (groupEncryptor, error) {
		return publicKeyGroup{enc, pub.Params.CKKS}, nil
	}, pt)
	if err != nil {
		t.Fatal(err)
	}
	if g.File != groupFile(0, 1) || g.Count != 5 {
		t.Fatalf("filled group %+v", g)
	}
	after, _ := os.ReadFile(filepath.Join(idx, manifestFile))
	m2, err := Load(idx)
	if string(after) != string(before) || err != nil || m2.Groups[0].File != groupFile(0, 0) || m2.Count != 3 {
		t.Fatalf("the manifest changed before the fill was committed: %v %+v", err, m2)
	}
	if e := decryptError(t, idx, owner, m2.Groups[0], all, 4); e > 1e-5 {
		t.Fatalf("the named group no longer decrypts to its 3 entries: %.3g", e)
	}
	// A manifest naming the uncommitted file with the old count is refused.
	liar := *m2
	liar.Groups = []Group{m2.Groups[0]}
	liar.Groups[0].File, liar.Groups[0].Fills = groupFile(0, 1), 1
	if _, err := LoadGroup(idx, &liar, pub.Params, liar.Groups[0]); !errors.Is(err, errs.ErrMismatch) {
		t.Fatalf("a filled file read with the count 3: %v", err)
	}
	// The next enrollment removes the stray file and fills again.
	if _, err := EnrollSeeded(idx, owner, all[3*4:7*4], 4, 4, EnrollOptions{}); err != nil {
		t.Fatal(err)
	}
	m3, _ := Load(idx)
	if g := m3.Groups[0]; g.File != groupFile(0, 1) || g.Count != 7 || !g.Seeded || len(m3.Groups) != 1 {
		t.Fatalf("after the rerun: %+v", m3.Groups)
	}
	if e := decryptError(t, idx, owner, m3.Groups[0], all, 4); e > 1e-5 {
		t.Fatalf("refilled group: error %.3g", e)
	}

	// Crash 2: the manifest names the new file, the old one is still there.
	old := filepath.Join(idx, groupFile(0, 0))
	cur, _ := os.ReadFile(filepath.Join(idx, groupFile(0, 1)))
	os.WriteFile(old, cur, 0o644)
	if _, err := Enroll(idx, pub, all[7*4:8*4], 1, 4, EnrollOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Fatalf("the replaced file survived the next enrollment: %v", err)
	}
	m4, _ := Load(idx)
	if g := m4.Groups[0]; g.File != groupFile(0, 2) || g.Count != 8 || g.Seeded {
		t.Fatalf("after the public-key fill: %+v", g)
	}

	// Manifests that lie about a filled group.
	path := filepath.Join(idx, manifestFile)
	good, _ := os.ReadFile(path)
	for name, edit := range map[string]func(*Manifest){
		"count": func(m *Manifest) { m.Groups[0].Count--; m.Count-- },
		"fills": func(m *Manifest) { m.Groups[0].Fills = 1 }, // names group-000000.fill-2.ct as fill 1
		"file":  func(m *Manifest) { m.Groups[0].File = groupFile(0, 0) },
	} {
		var bad Manifest
		json.Unmarshal(good, &bad)
		edit(&bad)
		if err := bad.validate(); err == nil {
			_, err = LoadGroup(idx, &bad, pub.Params, bad.Groups[0])
			if !errors.Is(err, errs.ErrMismatch) {
				t.Errorf("%s: a lying manifest was read: %v", name, err)
			}
		} else if !errors.Is(err, errs.ErrCorrupt) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// An older version of the group put back under the current name.
	prev := filepath.Join(idx, groupFile(0, 2))
	cur1 := cur // fill 1's file
	os.WriteFile(prev, cur1, 0o644)
	if _, err := LoadGroup(idx, m4, pub.Params, m4.Groups[0]); !errors.Is(err, errs.ErrMismatch) {
		t.Fatalf("an older file under the filled group's name: %v", err)
	}
}

// TestReaderOfAReplacedGroup: a reader that loaded the manifest before a
// fill is told the index changed, not that it is corrupt.
func TestReaderOfAReplacedGroup(t *testing.T) {
	idx, pub := setup(t)
	if _, err := Enroll(idx, pub, vectors(3), 3, 4, EnrollOptions{}); err != nil {
		t.Fatal(err)
	}
	stale, _ := Load(idx)
	if _, err := Enroll(idx, pub, vectors(1), 1, 4, EnrollOptions{}); err != nil {
		t.Fatal(err)
	}
	err := StreamGroup(idx, stale, pub.Params, stale.Groups[0], 4, func(int, []*rlwe.Ciphertext) error { return nil })
	if !errors.Is(err, errs.ErrMismatch) || !strings.Contains(err.Error(), "reopen") {
		t.Fatalf("stale reader: %v", err)
	}
}

// TestFillCosts measures what a fill costs at a real preset (skipped unless
// ENCMATCH_FILL_MEASURE is set; ENCMATCH_FILL_PRESET, _KAPPA, _DIM choose
// the parameters): bytes and seconds of a new group, of a fill by each
// enroller, of reading the group back (regeneration included), and the
// decrypted error before and after each fill. docs/STORAGE.md quotes it.
func TestFillCosts(t *testing.T) {
	if os.Getenv("ENCMATCH_FILL_MEASURE") == "" {
		t.Skip("set ENCMATCH_FILL_MEASURE=1 to measure")
	}
	env := func(k string, d int) int {
		if v, err := strconv.Atoi(os.Getenv(k)); err == nil {
			return v
		}
		return d
	}
	preset := os.Getenv("ENCMATCH_FILL_PRESET")
	if preset == "" {
		preset = params.Real
	}
	kappa, dim := env("ENCMATCH_FILL_KAPPA", 13), env("ENCMATCH_FILL_DIM", 32)
	set, err := params.New(preset, kappa, dim)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kd := filepath.Join(dir, "keys")
	strat, _ := strategy.New(strategy.BSGSTBE, 4, set.L())
	t0 := time.Now()
	if _, err := keys.Generate(kd, set, strat); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s kappa %d dim %d (l = %d, %d slots): keygen %.1f s", preset, kappa, dim, set.L(), set.Slots(), time.Since(t0).Seconds())
	srv := filepath.Join(kd, keys.ServerDir)
	idx := filepath.Join(dir, "index")
	if _, err := Create(idx, srv, 0.5, CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pub, err := keys.LoadPublic(srv)
	if err != nil {
		t.Fatal(err)
	}
	owner, err := keys.LoadClient(kd)
	if err != nil {
		t.Fatal(err)
	}
	all := make([]float32, dim*260)
	for i := range all {
		all[i] = float32(math.Sin(float64(i)*0.37)) + 0.01*float32(i%dim)
	}
	at := 0
	report := func(what string, sum *EnrollSummary, took time.Duration) {
		m, _ := Load(idx)
		g := m.Groups[0]
		t1 := time.Now()
		if _, err := LoadGroup(idx, m, set, g); err != nil {
			t.Fatal(err)
		}
		load := time.Since(t1)
		e := decryptError(t, idx, owner, g, all, dim)
		t.Logf("%-28s %6.2f s  file %9d B (%s)  load %.2f s  max error %.3g  per diagonal: write %.1f ms, load %.1f ms",
			what, took.Seconds(), g.Bytes, map[bool]string{true: "seeded", false: "whole"}[g.Seeded], load.Seconds(), e,
			1e3*took.Seconds()/float64(set.L()), 1e3*load.Seconds()/float64(set.L()))
	}
	step := func(what string, k int, asOwner bool) {
		t1 := time.Now()
		var sum *EnrollSummary
		if asOwner {
			sum, err = EnrollSeeded(idx, owner, all[at*dim:(at+k)*dim], k, dim, EnrollOptions{})
		} else {
			sum, err = Enroll(idx, pub, all[at*dim:(at+k)*dim], k, dim, EnrollOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
		at += k
		report(what, sum, time.Since(t1))
	}
	step("new group, public key (240)", 240, false)
	step("fill 1, public key (+3)", 3, false)
	step("fill 2, owner (+3)", 3, true)
	step("fill 3, owner (+3)", 3, true)
	step("fill 4, public key (+3)", 3, false)
	step("fill 5, owner (+3)", 3, true)
	// a fresh seeded group, for its load time
	fresh := filepath.Join(dir, "fresh")
	if _, err := Create(fresh, srv, 0.5, CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()
	if _, err := EnrollSeeded(fresh, owner, all[:240*dim], 240, dim, EnrollOptions{}); err != nil {
		t.Fatal(err)
	}
	took := time.Since(t1)
	m, _ := Load(fresh)
	t2 := time.Now()
	if _, err := LoadGroup(fresh, m, set, m.Groups[0]); err != nil {
		t.Fatal(err)
	}
	t.Logf("new group, owner (240)        %6.2f s  file %9d B  load %.2f s", took.Seconds(), m.Groups[0].Bytes, time.Since(t2).Seconds())
	// one mask: what each further seed would add per diagonal to every read
	rq := set.CKKS.RingQ().AtLevel(set.CKKS.MaxLevel())
	poly := rq.NewPoly()
	seed, _ := seeded.NewSeed()
	t3 := time.Now()
	for i := 0; i < 20; i++ {
		seeded.Mask(rq, seed, uint64(i), poly)
	}
	t.Logf("one mask (regenerated c1): %.2f ms", 1e3*time.Since(t3).Seconds()/20)
}
