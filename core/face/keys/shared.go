package keys

import (
	"crypto/sha256"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"weak"
)

// sharedSets holds, per key-file identity (evaluationIdentity), the
// evaluation keys last loaded for it, weakly: they live as long as some
// caller holds them, and are loaded again after that.
var sharedSets = struct {
	sync.Mutex
	m map[[32]byte]*sharedEntry
}{m: map[[32]byte]*sharedEntry{}}

type sharedEntry struct {
	load sync.Mutex // one load at a time per identity
	ptr  weak.Pointer[Evaluation]
}

// LoadEvaluationShared is LoadEvaluation with one copy in memory per key
// set: a caller whose key files are identical to those of a set already
// held in this process (two indexes enrolled under one key set, in one
// service) gets that set instead of a second copy. The returned keys are
// read-only for every holder.
//
// Identity is the key set's id and fingerprint and, for every file the
// strategy needs, its name and the SHA-256 checksum its envelope ends
// with. A set is shared only after LoadEvaluation verified files with
// exactly those checksums, so a directory that claims another's checksums
// without holding its bytes gets keys whose content hashes to what its
// own files claim, never unverified ones; directories that differ in any
// file (another tenant's keys under the same key id included) do not
// share. A directory whose files cannot be identified is loaded without
// sharing, and LoadEvaluation reports what is wrong with it.
func LoadEvaluationShared(dir string) (*Evaluation, error) {
	id, ok := evaluationIdentity(dir)
	if !ok {
		return LoadEvaluation(dir)
	}
	sharedSets.Lock()
	e := sharedSets.m[id]
	if e == nil {
		e = &sharedEntry{}
		sharedSets.m[id] = e
	}
	for k, other := range sharedSets.m { // forget sets nobody holds any more
		if other != e && other.ptr.Value() == nil && other.load.TryLock() {
			delete(sharedSets.m, k)
			other.load.Unlock()
		}
	}
	sharedSets.Unlock()

	e.load.Lock()
	defer e.load.Unlock()
	if ek := e.ptr.Value(); ek != nil {
		return ek, nil
	}
	ek, err := LoadEvaluation(dir)
	if err != nil {
		return nil, err
	}
	e.ptr = weak.Make(ek)
	return ek, nil
}

// evaluationIdentity hashes what identifies the evaluation keys in dir
// (see LoadEvaluationShared); false when a file is missing or unreadable.
func evaluationIdentity(dir string) ([32]byte, bool) {
	meta, set, err := LoadServerMeta(dir)
	if err != nil {
		return [32]byte{}, false
	}
	strat, err := meta.SimilarityStrategy(set)
	if err != nil {
		return [32]byte{}, false
	}
	h := sha256.New()
	for _, s := range []string{meta.KeyID, meta.Fingerprint, strat.Name, strconv.Itoa(strat.N1)} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	files := []string{filepath.Join(dir, relinFile)}
	for _, g := range GaloisElements(set, strat.Rotations()) {
		files = append(files, galoisPath(dir, g))
	}
	for _, path := range files {
		sum, ok := trailingChecksum(path)
		if !ok {
			return [32]byte{}, false
		}
		h.Write([]byte(filepath.Base(path)))
		h.Write(sum[:])
	}
	var id [32]byte
	copy(id[:], h.Sum(nil))
	return id, true
}

// trailingChecksum reads the 32-byte SHA-256 an envelope file ends with.
func trailingChecksum(path string) ([32]byte, bool) {
	var sum [32]byte
	f, err := os.Open(path)
	if err != nil {
		return sum, false
	}
	defer f.Close()
	if _, err := f.Seek(-int64(len(sum)), io.SeekEnd); err != nil {
		return sum, false
	}
	_, err = io.ReadFull(f, sum[:])
	return sum, err == nil
}
