package index

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"encmatch/core/base/comparator"
	"encmatch/core/base/errs"
	"encmatch/core/base/params"
	"encmatch/core/face/keys"
	"encmatch/core/face/strategy"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

func setup(t *testing.T) (string, *keys.Public) {
	t.Helper()
	set, err := params.New(params.Toy, params.MinKappa, 4)
	if err != nil {
		t.Fatal(err)
	}
	return setupWith(t, set)
}

// setupWith makes a bsgs-tbe key set of set and an empty index; it returns
// the index and the key set's public part (the keys are beside the index,
// in "keys").
func setupWith(t *testing.T, set *params.Set) (string, *keys.Public) {
	t.Helper()
	dir := t.TempDir()
	kd := filepath.Join(dir, "keys")
	strat, _ := strategy.New(strategy.BSGSTBE, 2, set.L())
	if _, err := keys.Generate(kd, set, strat); err != nil {
		t.Fatal(err)
	}
	srv := filepath.Join(kd, keys.ServerDir)
	idx := filepath.Join(dir, "index")
	if _, err := Create(idx, srv, 0.5, CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pub, err := keys.LoadPublic(srv)
	if err != nil {
		t.Fatal(err)
	}
	return idx, pub
}

func vectors(n int) []float32 {
	out := make([]float32, 4*n)
	for i := range out {
		out[i] = float32(i%5) + 1
	}
	return out
}

func TestEnrollAppendsGroups(t *testing.T) {
	idx, pub := setup(t)
	if _, err := Enroll(idx, pub, vectors(3), 3, 4, EnrollOptions{}); err != nil {
		t.Fatal(err)
	}
	slots := pub.Params.Slots()
	sum, err := Enroll(idx, pub, vectors(slots+2), slots+2, 4, EnrollOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := Load(idx)
	if err != nil {
		t.Fatal(err)
	}
	// The first group is filled (slots-3 vectors), the other 5 make a new one.
	if sum.GroupsWritten != 2 || sum.GroupsFilled != 1 || sum.GroupsNew != 1 || m.Count != slots+5 || len(m.Groups) != 2 {
		t.Fatalf("summary %+v manifest count %d groups %d", sum, m.Count, len(m.Groups))
	}
	if g := m.Groups[0]; g.Count != slots || g.Fills != 1 || g.File != "group-000000.fill-1.ct" {
		t.Fatalf("filled group %+v", g)
	}
	if g := m.Groups[1]; g.Start != slots || g.Count != 5 {
		t.Fatalf("last group %+v", g)
	}
	if w := sum.Writes; len(w) != 2 || !w[0].Filled || w[0].Added != slots-3 || w[0].Count != slots || w[1].Filled || w[1].Added != 5 {
		t.Fatalf("writes %+v", w)
	}
	if _, err := os.Stat(filepath.Join(idx, groupFile(0, 0))); !os.IsNotExist(err) {
		t.Fatalf("the replaced group file is still there: %v", err)
	}
	if _, err := LoadGroup(idx, m, pub.Params, m.Groups[1]); err != nil {
		t.Fatal(err)
	}
}

func TestBadVectorsWriteNothing(t *testing.T) {
	idx, pub := setup(t)
	data := vectors(4)
	data[9] = float32(math.NaN())
	if _, err := Enroll(idx, pub, data, 4, 4, EnrollOptions{}); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("NaN accepted: %v", err)
	}
	zero := vectors(2)
	for i := 4; i < 8; i++ {
		zero[i] = 0
	}
	if _, err := Enroll(idx, pub, zero, 2, 4, EnrollOptions{}); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("zero vector accepted: %v", err)
	}
	if _, err := Enroll(idx, pub, vectors(2)[:6], 2, 3, EnrollOptions{}); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("wrong dimension accepted: %v", err)
	}
	files, _ := filepath.Glob(filepath.Join(idx, "*"))
	if m, _ := Load(idx); m.Count != 0 || len(files) != 1 {
		t.Fatalf("something was written: %v", files)
	}
}

// TestInterruptedEnrollmentIsCleanedUp simulates a crash after a group file
// was written but before the manifest named it, plus a temporary file.
func TestInterruptedEnrollmentIsCleanedUp(t *testing.T) {
	idx, pub := setup(t)
	if _, err := Enroll(idx, pub, vectors(3), 3, 4, EnrollOptions{}); err != nil {
		t.Fatal(err)
	}
	g0, _ := os.ReadFile(filepath.Join(idx, groupFile(0, 0)))
	os.WriteFile(filepath.Join(idx, groupFile(1, 0)), g0[:len(g0)/2], 0o644)
	os.WriteFile(filepath.Join(idx, "."+groupFile(1, 0)+".tmp-42"), []byte("x"), 0o644)
	m, err := Load(idx)
	if err != nil || m.Count != 3 || len(m.Groups) != 1 {
		t.Fatalf("the manifest must name only complete groups: %v %+v", err, m)
	}
	if _, err := Enroll(idx, pub, vectors(2), 2, 4, EnrollOptions{}); err != nil {
		t.Fatal(err)
	}
	m, _ = Load(idx)
	if _, err := LoadGroup(idx, m, pub.Params, m.Groups[0]); err != nil || m.Count != 5 || len(m.Groups) != 1 {
		t.Fatalf("resumed enrollment: %v count %d", err, m.Count)
	}
	if _, err := os.Stat(filepath.Join(idx, groupFile(1, 0))); !os.IsNotExist(err) {
		t.Fatalf("the stray group file is still there: %v", err)
	}
	if tmps, _ := filepath.Glob(filepath.Join(idx, ".*tmp*")); len(tmps) != 0 {
		t.Fatalf("temporary files left: %v", tmps)
	}
}

func TestBadManifestsAreRefused(t *testing.T) {
	idx, pub := setup(t)
	if _, err := Enroll(idx, pub, vectors(3), 3, 4, EnrollOptions{}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(idx, manifestFile)
	good, _ := os.ReadFile(path)
	for name, data := range map[string][]byte{
		"truncated": good[:len(good)/2],
		"garbage":   []byte("\x00\x01"),
		"count":     []byte(replace(string(good), `"count": 3`, `"count": 4`)),
		"delta":     []byte(replace(string(good), `"delta": 0.5`, `"delta": 7`)),
	} {
		os.WriteFile(path, data, 0o644)
		if _, err := Load(idx); !errors.Is(err, errs.ErrCorrupt) {
			t.Errorf("%s manifest: %v", name, err)
		}
	}
	if _, err := Load(filepath.Join(idx, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing index: %v", err)
	}
	if _, err := Create(idx, filepath.Join(idx, "no-keys"), 0.5, CreateOptions{}); err == nil {
		t.Error("index created without keys")
	}
}

func replace(s, old, new string) string {
	for i := 0; i+len(old) <= len(s); i++ {
		if s[i:i+len(old)] == old {
			return s[:i] + new + s[i+len(old):]
		}
	}
	panic("pattern not found: " + old)
}

// TestSeededGroups enrolls the same vectors with the public key and as the
// key owner: the seeded group is half the size, decrypts to the same
// diagonals, and a corrupted seed or a manifest that misnames the storage
// is refused.
func TestSeededGroups(t *testing.T) {
	idx, pub := setup(t)
	owner, err := keys.LoadClient(filepath.Join(filepath.Dir(idx), "keys"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Enroll(idx, pub, vectors(3), 3, 4, EnrollOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := EnrollSeeded(idx, owner, vectors(3), 3, 4, EnrollOptions{NewGroups: true}); err != nil {
		t.Fatal(err)
	}
	m, err := Load(idx)
	if err != nil {
		t.Fatal(err)
	}
	whole, half := m.Groups[0], m.Groups[1]
	if whole.Seeded || !half.Seeded || float64(half.Bytes) > 0.51*float64(whole.Bytes) {
		t.Fatalf("groups %+v", m.Groups)
	}
	for _, g := range m.Groups {
		if over := g.Bytes - BytesPerGroup(pub.Params, 0, g.Seeded); over < 0 || over > 256 {
			t.Fatalf("group %s: %d bytes, BytesPerGroup says %d", g.File, g.Bytes, BytesPerGroup(pub.Params, 0, g.Seeded))
		}
	}
	a, err := LoadGroup(idx, m, pub.Params, whole)
	if err != nil {
		t.Fatal(err)
	}
	b, err := LoadGroup(idx, m, pub.Params, half)
	if err != nil {
		t.Fatal(err)
	}
	p := pub.Params.CKKS
	dec, ecd := rlwe.NewDecryptor(p, owner.Secret), ckks.NewEncoder(p)
	for i := range a {
		x, y := make([]float64, p.MaxSlots()), make([]float64, p.MaxSlots())
		if err := ecd.Decode(dec.DecryptNew(a[i]), x); err != nil {
			t.Fatal(err)
		}
		if err := ecd.Decode(dec.DecryptNew(b[i]), y); err != nil {
			t.Fatal(err)
		}
		for j := range x {
			if math.Abs(x[j]-y[j]) > 1e-6 {
				t.Fatalf("diagonal %d slot %d: public-key %v, seeded %v", i, j, x[j], y[j])
			}
		}
	}

	// Streamed with its stored halves only, each diagonal completed by the
	// reader equals LoadGroup's, bit for bit; a whole group has no masks,
	// and a completed diagonal is not completed twice.
	for _, g := range m.Groups {
		want, err := LoadGroup(idx, m, pub.Params, g)
		if err != nil {
			t.Fatal(err)
		}
		seen := 0
		err = StreamGroupStoredHalves(idx, m, pub.Params, g, 3, func(first int, cts []*rlwe.Ciphertext, masks *Masks) error {
			if (masks != nil) != g.Seeded {
				t.Fatalf("group %s (seeded %v): masks %v", g.File, g.Seeded, masks)
			}
			for k, ct := range cts {
				if masks != nil {
					if ct.Degree() != 0 {
						t.Fatalf("diagonal %d streamed with degree %d", first+k, ct.Degree())
					}
					if err := masks.Complete(first+k, ct); err != nil {
						t.Fatal(err)
					}
					if masks.Complete(first+k, ct) == nil {
						t.Fatal("a complete diagonal was completed again")
					}
				}
				if !ct.Equal(want[first+k]) {
					t.Fatalf("group %s diagonal %d differs from LoadGroup's", g.File, first+k)
				}
			}
			seen += len(cts)
			return nil
		})
		if err != nil || seen != len(want) {
			t.Fatalf("group %s: streamed %d of %d, %v", g.File, seen, len(want), err)
		}
	}

	misnamed := *m
	misnamed.Groups = []Group{m.Groups[0], m.Groups[1]}
	misnamed.Groups[1].Seeded = false
	if _, err := LoadGroup(idx, &misnamed, pub.Params, misnamed.Groups[1]); !errors.Is(err, errs.ErrMismatch) {
		t.Fatalf("a seeded group read as whole: %v", err)
	}

	path := filepath.Join(idx, half.File)
	data, _ := os.ReadFile(path)
	seedAt := len(data) - 32 - int(BytesPerGroup(pub.Params, 0, true)) + 8 // after the seed record's length
	data[seedAt+5] ^= 1
	os.WriteFile(path, data, 0o644)
	err = StreamGroup(idx, m, pub.Params, half, 4, func(int, []*rlwe.Ciphertext) error { return nil })
	if !errors.Is(err, errs.ErrCorrupt) || !strings.Contains(err.Error(), "seed") {
		t.Fatalf("corrupted seed: %v", err)
	}
}

// TestCreateRefusesBadDelta: the threshold is fixed at creation, a finite
// cosine similarity in (-1, 1); nothing is written for another. Each index
// gets its own uid (sealed labels are bound to it).
func TestCreateRefusesBadDelta(t *testing.T) {
	idx, _ := setup(t)
	srv := filepath.Join(filepath.Dir(idx), "keys", keys.ServerDir)
	for _, d := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), 1, -1, 1.5, -2} {
		dir := filepath.Join(t.TempDir(), "bad")
		if _, err := Create(dir, srv, d, CreateOptions{}); !errors.Is(err, errs.ErrInvalid) {
			t.Fatalf("delta %v accepted: %v", d, err)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("delta %v: %s was created", d, dir)
		}
	}
	other := filepath.Join(t.TempDir(), "other")
	m2, err := Create(other, srv, 0.5, CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m1, err := Load(idx)
	if err != nil {
		t.Fatal(err)
	}
	if len(m1.UID) != 32 || m1.UID == m2.UID {
		t.Fatalf("uids %q and %q", m1.UID, m2.UID)
	}
}

// TestPayloadBandWarning: a payload index warns at creation when its
// comparator's value band is wider than PayloadBandLimit, not otherwise.
func TestPayloadBandWarning(t *testing.T) {
	for _, kappa := range []int{params.MinKappa, 10, 12, params.MaxKappa} {
		m := &Manifest{Delta: 0.5, ScoreScale: comparator.DefaultScoreScale, PayloadWidth: 7}
		m.Params.Kappa = kappa
		c, err := comparator.New(kappa, 0.5, comparator.DefaultScoreScale)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(m.Warnings()) > 0; got != (c.ValueBand > PayloadBandLimit) {
			t.Fatalf("kappa %d (band %.4f): warned %v", kappa, c.ValueBand, got)
		}
		m.PayloadWidth = 0
		if len(m.Warnings()) != 0 {
			t.Fatalf("kappa %d: a plain index warned", kappa)
		}
	}
}

// TestLegacyModuliIndexOpens: an index of a key set made with the primes
// chosen before 2026-11-29 (params.ModuliAlternating) loads with them, and
// its groups read back.
func TestLegacyModuliIndexOpens(t *testing.T) {
	set, err := params.NewWithModuli(params.Toy, params.MinKappa, 4, false, params.ModuliAlternating)
	if err != nil {
		t.Fatal(err)
	}
	idx, pub := setupWith(t, set)
	if _, err := Enroll(idx, pub, vectors(3), 3, 4, EnrollOptions{}); err != nil {
		t.Fatal(err)
	}
	m, err := Load(idx)
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.ParamSet()
	if err != nil {
		t.Fatal(err)
	}
	if got.Moduli != params.ModuliAlternating || got.Fingerprint() != set.Fingerprint() {
		t.Fatalf("legacy index opened with moduli %v, fingerprint %s (made %s)", got.Moduli, got.Fingerprint(), set.Fingerprint())
	}
	cts, err := LoadGroup(idx, m, got, m.Groups[0])
	if err != nil || len(cts) != got.L() {
		t.Fatalf("legacy group: %d ciphertexts, %v", len(cts), err)
	}
}
