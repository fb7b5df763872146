package offload

import (
	"encoding/binary"
	"errors"
	"math/rand"
	"path/filepath"
	"testing"

	"encmatch/core/base/errs"
	"encmatch/core/base/params"
	"encmatch/core/face/client"
	"encmatch/core/face/index"
	"encmatch/core/face/keys"
	"encmatch/core/face/result"
	"encmatch/core/face/strategy"

	"github.com/tuneinsight/lattigo/v6/ring"
)

// toyIndex makes a key set of preset for strategy name and an index of n
// random vectors of dimension 32; it returns the key and index directories.
func toyIndex(t *testing.T, preset, name string, n int) (string, string) {
	return toyPayloadIndex(t, preset, name, n, 0)
}

// toyPayloadIndex is toyIndex with width random payload values per vector
// (a payload key set and index when width > 0).
func toyPayloadIndex(t *testing.T, preset, name string, n, width int) (string, string) {
	t.Helper()
	set, err := params.NewWith(preset, 7, 32, width > 0)
	if err != nil {
		t.Fatal(err)
	}
	strat, err := strategy.New(name, 0, set.L())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keyDir, indexDir := filepath.Join(dir, "keys"), filepath.Join(dir, "index")
	if _, err := keys.Generate(keyDir, set, strat); err != nil {
		t.Fatal(err)
	}
	if _, err := index.Create(indexDir, filepath.Join(keyDir, keys.ServerDir), 0.5, index.CreateOptions{PayloadWidth: width}); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		return keyDir, indexDir
	}
	pub, err := keys.LoadPublic(filepath.Join(keyDir, keys.ServerDir))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(1))
	data := make([]float32, n*32)
	for i := range data {
		data[i] = float32(rng.NormFloat64())
	}
	pays := make([]int16, n*width)
	for i := range pays {
		pays[i] = int16(rng.Intn(1 << 16))
	}
	if width == 0 {
		pays = nil
	}
	if _, err := index.Enroll(indexDir, pub, data, n, 32, index.EnrollOptions{Payloads: pays}); err != nil {
		t.Fatal(err)
	}
	return keyDir, indexDir
}

// TestPlanDescribesAndExports checks the plan's description and the shapes
// of what it exports, and that it refuses what it cannot serve.
func TestPlanDescribesAndExports(t *testing.T) {
	keyDir, indexDir := toyIndex(t, params.Toy, strategy.BSGSTBE, 2500)
	pl, err := Open(indexDir, filepath.Join(keyDir, keys.ServerDir), nil)
	if err != nil {
		t.Fatal(err)
	}
	d := pl.Describe()
	p := pl.Params.CKKS
	if len(d.Q) != p.QCount() || len(d.P) != p.PCount() || len(d.Psi) != len(d.Q)+len(d.P) || len(d.Groups) != 2 {
		t.Fatalf("description: %d Q, %d P, %d roots, %d groups", len(d.Q), len(d.P), len(d.Psi), len(d.Groups))
	}
	for i, psi := range d.Psi {
		q := append(d.Q, d.P...)[i]
		if ring.ModExp(psi, uint64(p.N()), q) != q-1 {
			t.Fatalf("psi %d is not a primitive 2N-th root of unity", i)
		}
	}
	for _, r := range append(d.InnerSum, pl.Strategy.Babies()...) {
		if d.Galois[r] != p.GaloisElement(r) {
			t.Fatalf("rotation %d: Galois element %d, want %d", r, d.Galois[r], p.GaloisElement(r))
		}
	}
	rows := p.QCount() + p.PCount()
	for _, g := range []uint64{0, d.Galois[1]} {
		key, err := pl.Key(g)
		if err != nil {
			t.Fatal(err)
		}
		digits := (p.QCount() + p.PCount() - 1) / p.PCount()
		if len(key) != digits*2*rows*p.N()*8 {
			t.Fatalf("key %d: %d bytes", g, len(key))
		}
	}
	if _, err := pl.Key(3); !errors.Is(err, errs.ErrMismatch) {
		t.Fatalf("a key the set lacks: %v", err)
	}
	if _, err := pl.Program(result.Membership); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("a program before any group: %v", err)
	}
	l := pl.Strategy.L
	for _, bad := range [][3]int{{2, 0, 1}, {0, -1, 1}, {0, 0, 0}, {0, l - 1, 2}} {
		if _, _, err := pl.Group(bad[0], bad[1], bad[2]); !errors.Is(err, errs.ErrInvalid) {
			t.Fatalf("group %v: %v", bad, err)
		}
	}
	for first := 0; first < l; first += 24 {
		out, level, err := pl.Group(1, first, min(24, l-first))
		if err != nil {
			t.Fatal(err)
		}
		if level != p.MaxLevel() || len(out) != min(24, l-first)*2*(level+1)*p.N()*8 {
			t.Fatalf("chunk at %d: level %d, %d bytes", first, level, len(out))
		}
	}
	if pl.loaded != nil {
		t.Fatal("the group is kept after its last chunk")
	}
	if _, err := pl.Program(result.Identification); err != nil {
		t.Fatal(err)
	}
	if _, err := pl.Program(result.Payload); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("a payload program for an index without payloads: %v", err)
	}

	c, err := client.Open(keyDir)
	if err != nil {
		t.Fatal(err)
	}
	q := make([]float32, 32)
	q[3] = 1
	qb, err := c.EncryptQuery(q)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := pl.Query(qb[:len(qb)-3]); err == nil {
		t.Fatal("a truncated query was accepted")
	}
	raw, level, err := pl.Query(qb)
	if err != nil || len(raw) != 2*(level+1)*p.N()*8 {
		t.Fatalf("query: %v, %d bytes at level %d", err, len(raw), level)
	}

	// Result: sizes, residues and modes are checked.
	outLevel := pl.programs[false].Level()
	size := 2 * (outLevel + 1) * p.N() * 8
	if _, err := pl.Result(result.Membership, make([]byte, size+8), 0); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("wrong size: %v", err)
	}
	big := make([]byte, size)
	binary.LittleEndian.PutUint64(big, p.Q()[0])
	if _, err := pl.Result(result.Membership, big, 0); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("a residue not below its prime: %v", err)
	}
	if _, err := pl.Result(result.Payload, make([]byte, size), 0); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("payload mode of an index without payloads: %v", err)
	}
	if _, err := pl.Result(result.Identification, make([]byte, 2*size), 4); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("a bound outside payload mode: %v", err)
	}
	out, err := pl.Result(result.Identification, make([]byte, 2*size), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := result.Unmarshal(out, pl.Manifest.Header(""), p); err != nil {
		t.Fatalf("the framed result does not open: %v", err)
	}
}

// TestPlanFramesPayloadResults: a payload index has a second program (its
// bits at the payload scale); Result compacts one output per served group
// with the groups' payload columns into a payload result of the layout for
// the bound, and refuses outputs of the wrong size.
func TestPlanFramesPayloadResults(t *testing.T) {
	keyDir, indexDir := toyPayloadIndex(t, params.Toy, strategy.BSGSTBE, 2500, 3)
	pl, err := Open(indexDir, filepath.Join(keyDir, keys.ServerDir), []int{1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pl.Result(result.Payload, nil, 0); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("a payload result before the group was exported: %v", err)
	}
	l := pl.Strategy.L
	if _, _, err := pl.Group(0, 0, l); err != nil {
		t.Fatal(err)
	}
	plain, err := pl.Program(result.Identification)
	if err != nil {
		t.Fatal(err)
	}
	prog, err := pl.Program(result.Payload)
	if err != nil {
		t.Fatal(err)
	}
	if prog.MetaData().Scale.Cmp(plain.MetaData().Scale) == 0 {
		t.Fatal("the payload program's bits are at the default scale")
	}
	size := 2 * (prog.Level() + 1) * pl.Params.CKKS.N() * 8
	if _, err := pl.Result(result.Payload, make([]byte, 2*size), 0); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("two outputs for one served group: %v", err)
	}
	out, err := pl.Result(result.Payload, make([]byte, size), 8)
	if err != nil {
		t.Fatal(err)
	}
	res, err := result.Unmarshal(out, pl.Manifest.Header(""), pl.Params.CKKS)
	if err != nil {
		t.Fatalf("the framed result does not open: %v", err)
	}
	if res.Layout == nil || res.Layout.Bound != 8 || len(res.Ciphertexts) != res.Layout.Ciphertexts() {
		t.Fatalf("payload result: layout %+v, %d ciphertexts", res.Layout, len(res.Ciphertexts))
	}
}

// TestPlanRefusesTheRealRing: the conjugate-invariant ring is the CPU
// engine's only.
func TestPlanRefusesTheRealRing(t *testing.T) {
	keyDir, indexDir := toyIndex(t, params.ToyReal, strategy.BSGSTBE, 0)
	if _, err := Open(indexDir, filepath.Join(keyDir, keys.ServerDir), nil); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("the real ring: %v", err)
	}
}
