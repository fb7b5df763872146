package keys

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// copyDir copies the regular files of src into a new directory.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "copy")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func TestSharedEvaluationOneCopyPerKeySet(t *testing.T) {
	dir, _ := generate(t)
	srv := filepath.Join(dir, ServerDir)
	a, err := LoadEvaluationShared(srv)
	if err != nil {
		t.Fatal(err)
	}
	b, err := LoadEvaluationShared(copyDir(t, srv)) // the same key set uploaded for a second index
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatal("two directories holding the same key files loaded two copies")
	}

	// Another key set: not shared, whatever its key id claims.
	other, _ := generate(t)
	c, err := LoadEvaluationShared(filepath.Join(other, ServerDir))
	if err != nil {
		t.Fatal(err)
	}
	if c == a {
		t.Fatal("another key set's keys were shared")
	}
	runtime.KeepAlive(a)
}

func TestSharedEvaluationRefusesWhatLoadRefuses(t *testing.T) {
	dir, _ := generate(t)
	srv := filepath.Join(dir, ServerDir)
	held, err := LoadEvaluationShared(srv)
	if err != nil {
		t.Fatal(err)
	}
	// A copy whose relinearisation key is damaged has another checksum
	// than the one held: it is loaded on its own, and refused.
	bad := copyDir(t, srv)
	path := filepath.Join(bad, relinFile)
	blob, _ := os.ReadFile(path)
	blob[len(blob)/2] ^= 1
	blob[len(blob)-1] ^= 1 // its claimed checksum no longer matches the held set's
	os.WriteFile(path, blob, 0o644)
	if ek, err := LoadEvaluationShared(bad); err == nil || ek == held {
		t.Fatalf("a damaged key file was served: %v", err)
	}
	// A missing file: the error of LoadEvaluation, not a shared set.
	os.Remove(path)
	if _, err := LoadEvaluationShared(bad); err == nil {
		t.Fatal("a key set without its relinearisation key loaded")
	}
	runtime.KeepAlive(held)
}

func TestSharedEvaluationIsDroppedWhenNobodyHoldsIt(t *testing.T) {
	dir, _ := generate(t)
	srv := filepath.Join(dir, ServerDir)
	a, err := LoadEvaluationShared(srv)
	if err != nil {
		t.Fatal(err)
	}
	id, ok := evaluationIdentity(srv)
	if !ok {
		t.Fatal("no identity for a complete key set")
	}
	a = nil
	_ = a
	runtime.GC()
	runtime.GC()
	sharedSets.Lock()
	e := sharedSets.m[id]
	sharedSets.Unlock()
	if e != nil && e.ptr.Value() != nil {
		t.Fatal("the shared set outlived every holder")
	}
	if b, err := LoadEvaluationShared(srv); err != nil || b == nil {
		t.Fatalf("reload after release: %v", err)
	}
}
