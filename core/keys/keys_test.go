package keys

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"encmatch/core/errs"
	"encmatch/core/params"
	"encmatch/core/strategy"
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
