package irisquery

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"encmatch/core/base/codec"
	"encmatch/core/base/errs"
	"encmatch/core/iris/irisdb"
	"encmatch/core/iris/iriskeys"
)

// randomCodes draws n masked codes of length l: 80 % of positions usable,
// bits uniform.
func randomCodes(rng *rand.Rand, n, l int) irisdb.Codes {
	c := irisdb.Codes{Rows: n, Len: l, Data: make([]int8, n*l)}
	for i := range c.Data {
		if rng.Float64() < 0.8 {
			c.Data[i] = int8(1 - 2*rng.IntN(2))
		}
	}
	return c
}

// plantMatch makes query row row gallery code code with a quarter of its
// usable bits flipped (a fractional Hamming distance of about 0.25).
func plantMatch(rng *rand.Rand, q irisdb.Codes, row int, gallery irisdb.Codes, code int) {
	l := q.Len
	copy(q.Data[row*l:(row+1)*l], gallery.Data[code*l:(code+1)*l])
	for i := row * l; i < (row+1)*l; i++ {
		if q.Data[i] != 0 && rng.Float64() < 0.25 {
			q.Data[i] = -q.Data[i]
		}
	}
}

// modelBits is the plaintext model: eye e matches iff some rotation r and
// code k with a common mask M > 0 have <c'_q, c'_k> > (1 - 2t) M.
func modelBits(db, q irisdb.Codes, rotations int, t float64) []bool {
	bits := make([]bool, q.Rows/rotations)
	for j := 0; j < q.Rows; j++ {
		qc := q.Data[j*q.Len : (j+1)*q.Len]
		for k := 0; k < db.Rows; k++ {
			dc := db.Data[k*db.Len : (k+1)*db.Len]
			ip, m := 0, 0
			for l := range qc {
				if qc[l] != 0 && dc[l] != 0 {
					m++
					ip += int(qc[l]) * int(dc[l])
				}
			}
			if m > 0 && float64(ip) > (1-2*t)*float64(m) {
				bits[j/rotations] = true
			}
		}
	}
	return bits
}

// keySet generates a key set of the preset in a fresh directory and
// loads its key holder.
func keySet(t *testing.T, preset string) (string, *iriskeys.Holder) {
	t.Helper()
	dir := t.TempDir()
	if _, err := iriskeys.Generate(dir, preset, 0); err != nil {
		t.Fatal(err)
	}
	holder, err := iriskeys.LoadHolder(filepath.Join(dir, iriskeys.HolderDir))
	if err != nil {
		t.Fatal(err)
	}
	return dir, holder
}

// encryptAndLoad encrypts the query q (rotations per eye) with key set
// dir's querier, then loads what the server holds: its keys (a key cache
// of cacheBytes, 0: the default), the database in dbDir and the query.
// It returns them and the query's path.
func encryptAndLoad(t *testing.T, dir, dbDir string, q irisdb.Codes, rotations int, cacheBytes int64) (*iriskeys.Server, *irisdb.DB, *Query, string) {
	t.Helper()
	querier, err := iriskeys.LoadQuerier(filepath.Join(dir, iriskeys.QuerierDir))
	if err != nil {
		t.Fatal(err)
	}
	qPath := filepath.Join(dir, "query.bin")
	if err := EncryptQuery(querier, qPath, q, rotations); err != nil {
		t.Fatal(err)
	}
	server, err := iriskeys.LoadServer(filepath.Join(dir, iriskeys.ServerDir), cacheBytes)
	if err != nil {
		t.Fatal(err)
	}
	db, err := irisdb.Load(server, dbDir)
	if err != nil {
		t.Fatal(err)
	}
	query, err := LoadQuery(server, qPath)
	if err != nil {
		t.Fatal(err)
	}
	return server, db, query, qPath
}

// TestFilesEndToEnd runs every role through its files at the toy preset:
// key generation, enrollment of 1,100 codes (two blocks), a public-key
// query of 3 eyes x 3 rotations (one eye enrolled, with 25 % of its bits
// flipped), the server's match, the key holder's decryption; and refuses a
// corrupted database file and another key set's query.
func TestFilesEndToEnd(t *testing.T) {
	dir, holder := keySet(t, "toy")
	if _, err := iriskeys.Generate(dir, "toy", 0); err == nil {
		t.Fatal("a second key set was written over the first")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	const rotations, eyes, thr = 3, 3, 0.34
	l := holder.Params.CCMM.Lit.Inner
	gallery := randomCodes(rng, 1100, l)
	q := randomCodes(rng, eyes*rotations, l)
	// Eye 1, rotation 2: gallery code 1030 (block 1) with a quarter of its
	// usable bits flipped (FHD 0.25 < t).
	plantMatch(rng, q, 1*rotations+2, gallery, 1030)
	want := modelBits(gallery, q, rotations, thr)
	if !want[1] || want[0] || want[2] {
		t.Fatalf("model bits %v, want [false true false]", want)
	}
	dbDir := filepath.Join(dir, "db")
	if _, err := irisdb.Enroll(holder, dbDir, gallery, thr, nil); err != nil {
		t.Fatal(err)
	}
	// A key cache of three keys: the pipeline reloads evicted keys from
	// their files (checked below) and must still give the model's bits.
	bp := holder.Params.Slots.Bootstrap.BootstrappingParameters
	server, db, query, qPath := encryptAndLoad(t, dir, dbDir, q, rotations, 3*int64(codec.GaloisKeySize(bp)))
	out := filepath.Join(dir, "result.bin")
	if _, err := Match(server, db, query, out, Pass{Product: filepath.Join(dir, "product.bin")}); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("a kept product with Algorithm 1's database: %v, want ErrInvalid", err)
	}
	st, err := Match(server, db, query, out, Pass{})
	if err != nil {
		t.Fatal(err)
	}
	ks := server.Cache.Stats()
	t.Logf("product %.1fs, pipeline %.1fs: %d half-bootstraps, %d bootstraps; key cache: %d loads (%.1fs), %d hits, peak %d bytes",
		st.Product.Seconds(), st.Pairs.Wall.Seconds(), st.Pairs.HalfBootstraps, st.Pairs.Bootstraps, ks.Loads, ks.LoadTime.Seconds(), ks.Hits, ks.PeakBytes)
	if els := len(iriskeys.ServerGaloisElements(holder.Params)); ks.Loads <= els || ks.PeakBytes > 4*int64(codec.GaloisKeySize(bp)) {
		t.Errorf("key cache: %d loads of %d keys, peak %d bytes: the budget of three keys was not exercised or not kept", ks.Loads, els, ks.PeakBytes)
	}
	got, err := Decrypt(holder, out)
	if err != nil {
		t.Fatal(err)
	}
	for e, v := range got {
		w := 0.0
		if want[e] {
			w = 1
		}
		if math.Abs(v-w) > 1e-4 {
			t.Errorf("eye %d: %v, the model says %v", e, v, want[e])
		}
	}

	// A damaged Galois key file gives ErrCorrupt when the key is read (the
	// evaluator passes the error on); a missing one is refused when the
	// server loads.
	gal := filepath.Join(dir, iriskeys.ServerDir, iriskeys.GaloisFile(iriskeys.ServerGaloisElements(holder.Params)[0]))
	kb, err := os.ReadFile(gal)
	if err != nil {
		t.Fatal(err)
	}
	bad := slices.Clone(kb)
	bad[len(bad)/2] ^= 1
	if err := os.WriteFile(gal, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	damaged, err := iriskeys.LoadServer(filepath.Join(dir, iriskeys.ServerDir), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := damaged.Cache.GetGaloisKey(iriskeys.ServerGaloisElements(holder.Params)[0]); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("a damaged key file: %v, want ErrCorrupt", err)
	}
	if err := os.Remove(gal); err != nil {
		t.Fatal(err)
	}
	if _, err := iriskeys.LoadServer(filepath.Join(dir, iriskeys.ServerDir), 0); err == nil {
		t.Fatal("a server directory with a missing key file loaded")
	}
	// The encapsulation keys are read and checked when the server loads: a
	// damaged file is ErrCorrupt, a missing one refused.
	if err := os.WriteFile(gal, kb, 0o644); err != nil {
		t.Fatal(err)
	}
	encFile := filepath.Join(dir, iriskeys.ServerDir, "encapsulation.key")
	eb, err := os.ReadFile(encFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		data []byte
	}{{"damaged", func() []byte { b := slices.Clone(eb); b[len(b)-9] ^= 1; return b }()}, {"truncated", eb[:len(eb)-8]}, {"missing", nil}} {
		if c.data == nil {
			err = os.Remove(encFile)
		} else {
			err = os.WriteFile(encFile, c.data, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := iriskeys.LoadServer(filepath.Join(dir, iriskeys.ServerDir), 0); err == nil || c.name != "missing" && !errors.Is(err, errs.ErrCorrupt) {
			t.Fatalf("%s encapsulation keys: %v", c.name, err)
		}
	}
	// A flipped byte in the database is refused by the checksum, checked
	// as the product reads the file and before the product is used: no
	// result is written (Load checks only the headers; a truncated file
	// is refused there).
	b, err := os.ReadFile(filepath.Join(dbDir, "encs.bin"))
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 1
	if err := os.WriteFile(filepath.Join(dbDir, "encs.bin"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	flipped, err := irisdb.Load(server, dbDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Match(server, flipped, query, filepath.Join(dir, "flipped.bin"), Pass{}); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("a product of a corrupted database: %v, want ErrCorrupt", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "flipped.bin")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a result of a corrupted database was written: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dbDir, "encs.bin"), b[:len(b)-1], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := irisdb.Load(server, dbDir); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("a truncated database: %v, want ErrCorrupt", err)
	}
	// Another key set's server refuses this key set's query.
	other := t.TempDir()
	if _, err := iriskeys.Generate(other, "toy", 0); err != nil {
		t.Fatal(err)
	}
	s2, err := iriskeys.LoadServer(filepath.Join(other, iriskeys.ServerDir), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadQuery(s2, qPath); !errors.Is(err, errs.ErrMismatch) {
		t.Fatalf("another key set's query: %v, want ErrMismatch", err)
	}
	// The querier's directory is not a key holder's.
	if _, err := iriskeys.LoadHolder(filepath.Join(dir, iriskeys.QuerierDir)); !errors.Is(err, errs.ErrMismatch) {
		t.Fatalf("querier directory loaded as the key holder's: %v", err)
	}
}
