package keys

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"encmatch/core/base/envelope"
	"encmatch/core/base/errs"
	"encmatch/core/base/params"
	"encmatch/core/face/strategy"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

func generate(t *testing.T) (string, *params.Set) {
	t.Helper()
	set, err := params.New(params.Toy, params.MinKappa, 8)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "keys")
	strat, _ := strategy.New(strategy.DG, 0, set.L())
	sum, err := Generate(dir, set, strat)
	if err != nil {
		t.Fatal(err)
	}
	if want := strat.KeyCount(set.Slots()); sum.RotationKeys != want || sum.ServerKeyBytes == 0 {
		t.Fatalf("summary %+v, want %d rotation keys", sum, want)
	}
	return dir, set
}

func TestGenerateLoadAndSeparation(t *testing.T) {
	dir, _ := generate(t)
	if _, err := LoadClient(dir); err != nil {
		t.Fatal(err)
	}
	srv := filepath.Join(dir, ServerDir)
	if _, err := LoadEvaluation(srv); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPublic(srv); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(srv, secretFile)); !os.IsNotExist(err) {
		t.Fatal("the server directory holds a secret key")
	}
	if st, _ := os.Stat(filepath.Join(dir, secretFile)); st.Mode().Perm() != 0o600 {
		t.Fatalf("secret key mode %v", st.Mode().Perm())
	}
	// A server directory with a secret key in it is refused.
	b, _ := os.ReadFile(filepath.Join(dir, secretFile))
	os.WriteFile(filepath.Join(srv, secretFile), b, 0o600)
	if _, err := LoadEvaluation(srv); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("server keys with a secret key loaded: %v", err)
	}
	if _, err := Generate(dir, nil, strategy.Strategy{}); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("overwrote a key directory: %v", err)
	}
}

func TestBadKeyFilesAreReported(t *testing.T) {
	dir, _ := generate(t)
	srv := filepath.Join(dir, ServerDir)
	if _, err := LoadClient(filepath.Join(dir, "nope")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing key directory: %v", err)
	}
	sk := filepath.Join(dir, secretFile)
	b, _ := os.ReadFile(sk)
	os.WriteFile(sk, b[:len(b)/2], 0o600)
	if _, err := LoadClient(dir); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("truncated secret key: %v", err)
	}
	rlk := filepath.Join(srv, relinFile)
	b, _ = os.ReadFile(rlk)
	b[len(b)/3] ^= 0xff
	os.WriteFile(rlk, b, 0o644)
	if _, err := LoadEvaluation(srv); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("corrupt relinearisation key: %v", err)
	}
	gks, _ := filepath.Glob(filepath.Join(srv, galoisFiles))
	os.Remove(gks[0])
	os.WriteFile(rlk, mustGen(t), 0o644)
	if _, err := LoadEvaluation(srv); err == nil {
		t.Fatal("missing rotation key not reported")
	}
	os.WriteFile(filepath.Join(srv, metaFile), []byte("{not json"), 0o644)
	if _, err := LoadPublic(srv); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("corrupt keys.json: %v", err)
	}
}

// mustGen returns a relinearisation key file of another key set (with the
// same parameters): it must be refused as a mismatch, not decoded.
func mustGen(t *testing.T) []byte {
	other, _ := generate(t)
	b, err := os.ReadFile(filepath.Join(other, ServerDir, relinFile))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestHugeInnerLengthIsRefused reproduces issue 14 item 1: a key file
// whose inner Lattigo length field is set to 2^36, with the envelope's
// checksum recomputed so that the frame is valid. Lattigo's decoder would
// allocate 2^36 elements and the process would die ("fatal error: runtime:
// out of memory", which no recover catches); loading must instead fail
// with ErrCorrupt, allocating no more than the key set itself.
func TestHugeInnerLengthIsRefused(t *testing.T) {
	dir, _ := generate(t)
	srv := filepath.Join(dir, ServerDir)
	gks, _ := filepath.Glob(filepath.Join(srv, galoisFiles))
	// Offsets in the payloads: a Galois key is element, NthRoot, then the
	// gadget ciphertext (base-two decomposition, rows of the matrix, ...);
	// the others start with a length.
	cases := []struct {
		file string
		off  int
		load func() error
	}{
		{gks[0], 24, func() error { _, err := LoadEvaluation(srv); return err }},
		{gks[len(gks)-1], 32, func() error { _, err := LoadEvaluation(srv); return err }},
		{filepath.Join(srv, relinFile), 8, func() error { _, err := LoadEvaluation(srv); return err }},
		{filepath.Join(srv, publicFile), 0, func() error { _, err := LoadPublic(srv); return err }},
		{filepath.Join(dir, secretFile), 8, func() error { _, err := LoadClient(dir); return err }},
	}
	measure := func(load func() error) (uint64, error) {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		err := load()
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc, err
	}
	for _, c := range cases {
		// The bound: what loading the honest keys allocates (parameters,
		// file buffers, keys), which is what a server pays anyway.
		limit, err := measure(c.load)
		if err != nil {
			t.Fatal(err)
		}
		orig, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		h, payload, err := envelope.Open(orig)
		if err != nil {
			t.Fatal(err)
		}
		bad := append([]byte(nil), payload...)
		binary.LittleEndian.PutUint64(bad[c.off:], 1<<36)
		if err := os.WriteFile(c.file, envelope.Seal(h, bad), 0o600); err != nil {
			t.Fatal(err)
		}
		alloc, loadErr := measure(c.load)
		if !errors.Is(loadErr, errs.ErrCorrupt) || !strings.Contains(loadErr.Error(), "length field 68719476736") {
			t.Fatalf("%s: %v", filepath.Base(c.file), loadErr)
		}
		if alloc > limit+1<<16 {
			t.Fatalf("%s: %d bytes allocated to refuse it, %d to load the honest key set", filepath.Base(c.file), alloc, limit)
		}
		t.Logf("%s: refused, %d bytes allocated (%d for the honest keys): %v", filepath.Base(c.file), alloc, limit, loadErr)
		os.WriteFile(c.file, orig, 0o600)
	}
	if _, err := LoadEvaluation(srv); err != nil {
		t.Fatalf("restored keys: %v", err)
	}
}

// TestOversizedKeyFileIsRefusedUnread: a key file whose payload has
// another size than the parameters give is refused from its header.
func TestOversizedKeyFileIsRefusedUnread(t *testing.T) {
	dir, _ := generate(t)
	srv := filepath.Join(dir, ServerDir)
	path := filepath.Join(srv, publicFile)
	orig, _ := os.ReadFile(path)
	h, payload, _ := envelope.Open(orig)
	os.WriteFile(path, envelope.Seal(h, append(payload, make([]byte, 1<<20)...)), 0o644)
	if _, err := LoadPublic(srv); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("oversized public key: %v", err)
	}
}

// FuzzMeta feeds arbitrary JSON to the key metadata decoder (ReadMeta's
// json.Unmarshal, without the file) and its checks: keys.json and
// client.json are read from directories a tenant uploads.
func FuzzMeta(f *testing.F) {
	set, err := ParamSet(params.Toy, params.MinKappa, 4)
	if err != nil {
		f.Fatal(err)
	}
	valid, _ := json.Marshal(&Meta{Format: formatV1, KeyID: "00", Preset: params.Toy, Insecure: true, Kappa: params.MinKappa,
		Dim: 4, Fingerprint: set.Fingerprint(), Strategy: strategy.BSGSTBE, N1: 2, Rotations: []int{1, 2}, GaloisElements: []uint64{5, 25}})
	f.Add(valid)
	f.Add([]byte(`{"format":1,"preset":"toy","kappa":7,"dim":9223372036854775807}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m := new(Meta)
		if json.Unmarshal(data, m) != nil {
			return
		}
		set, err := m.Params()
		if err != nil {
			if !errors.Is(err, errs.ErrCorrupt) && !errors.Is(err, errs.ErrMismatch) {
				t.Fatalf("error of another kind: %v", err)
			}
			return
		}
		if _, err := m.SimilarityStrategy(set); err != nil && !errors.Is(err, errs.ErrCorrupt) {
			t.Fatalf("error of another kind: %v", err)
		}
	})
}

func TestHugeDimIsRefused(t *testing.T) {
	m := &Meta{Format: formatV1, Preset: params.Toy, Kappa: params.MinKappa, Dim: math.MaxInt}
	if _, err := m.Params(); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("dimension 2^63-1: %v", err)
	}
}

// TestLegacyModuliKeySetOpens: a key set made with the primes chosen before
// 2026-11-29 (params.ModuliAlternating) loads as it was made, with its own
// primes (its keys decrypt what its public key encrypts), and a fingerprint
// that no choice of moduli gives is still refused.
func TestLegacyModuliKeySetOpens(t *testing.T) {
	set, err := params.NewWithModuli(params.Toy, params.MinKappa, 8, false, params.ModuliAlternating)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "keys")
	strat, _ := strategy.New(strategy.DG, 0, set.L())
	if _, err := Generate(dir, set, strat); err != nil {
		t.Fatal(err)
	}
	c, err := LoadClient(dir)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := LoadPublic(filepath.Join(dir, ServerDir))
	if err != nil {
		t.Fatal(err)
	}
	if c.Params.Moduli != params.ModuliAlternating || c.Params.Fingerprint() != set.Fingerprint() || pub.Params.Fingerprint() != set.Fingerprint() {
		t.Fatalf("legacy key set loaded with moduli %v, fingerprint %s (made %s)", c.Params.Moduli, c.Params.Fingerprint(), set.Fingerprint())
	}
	p := c.Params.CKKS
	want := []float64{0.25, -0.5, 1}
	pt := ckks.NewPlaintext(p, p.MaxLevel())
	if err := ckks.NewEncoder(p).Encode(want, pt); err != nil {
		t.Fatal(err)
	}
	ct, err := rlwe.NewEncryptor(p, pub.Key).EncryptNew(pt)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float64, len(want))
	if err := ckks.NewEncoder(p).Decode(rlwe.NewDecryptor(p, c.Secret).DecryptNew(ct), got); err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-3 {
			t.Fatalf("slot %d decrypts to %g, want %g", i, got[i], want[i])
		}
	}
	c.Meta.Fingerprint = strings.Repeat("0", 32)
	if _, err := c.Meta.Params(); !errors.Is(err, errs.ErrMismatch) {
		t.Fatalf("unknown fingerprint: %v, want a mismatch", err)
	}
}
