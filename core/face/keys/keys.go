// Package keys generates, stores and loads encmatch key sets.
//
// A key directory holds the client's secret key and a server/ subdirectory
// with exactly what the server may have: the public key (for enrollment),
// the relinearisation key and the rotation (Galois) keys of the similarity
// strategy plus those of the membership inner sum. The secret key never goes
// into server/, and loading server keys refuses a directory holding one.
//
//	key_dir/client.json        parameters and key id
//	key_dir/secret.key         secret key (mode 0600)
//	key_dir/server/keys.json   parameters, key id, Galois elements
//	key_dir/server/public.key
//	key_dir/server/relin.key
//	key_dir/server/gal-<element>.key
//
// Keys are generated into a temporary directory that is renamed into place
// when complete, one rotation key at a time (never the whole set in memory).
package keys

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"encmatch/core/base/codec"
	"encmatch/core/base/envelope"
	"encmatch/core/base/errs"
	"encmatch/core/base/parallel"
	"encmatch/core/base/params"
	"encmatch/core/face/strategy"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
)

// File and kind names.
const (
	ServerDir   = "server"
	metaFile    = "keys.json"
	clientFile  = "client.json"
	secretFile  = "secret.key"
	publicFile  = "public.key"
	relinFile   = "relin.key"
	formatV1    = 1
	KindSecret  = "secret-key"
	KindPublic  = "public-key"
	KindRelin   = "relinearization-key"
	KindGalois  = "galois-key"
	galoisFiles = "gal-*.key"
)

// Meta describes a key set; it is stored as client.json and server/keys.json.
type Meta struct {
	Format   int    `json:"format"`
	KeyID    string `json:"key_id"`
	Preset   string `json:"preset"`
	Insecure bool   `json:"insecure"`
	Kappa    int    `json:"kappa"`
	Dim      int    `json:"dim"`
	// Payload: the chain has the payload level (params.NewWith).
	Payload bool `json:"payload,omitempty"`
	// Fold: queries and galleries are folded (params.Set.Fold).
	Fold           bool     `json:"fold,omitempty"`
	Fingerprint    string   `json:"fingerprint"`
	Strategy       string   `json:"strategy"`
	N1             int      `json:"n1"`
	Rotations      []int    `json:"rotations"`
	GaloisElements []uint64 `json:"galois_elements"`
}

// Params rebuilds and checks the parameter set a Meta names.
func (m *Meta) Params() (*params.Set, error) {
	if m.Format != formatV1 {
		return nil, fmt.Errorf("%w: unsupported key format %d", errs.ErrCorrupt, m.Format)
	}
	if err := CheckDim(m.Dim); err != nil {
		return nil, fmt.Errorf("%w: key metadata: %v", errs.ErrCorrupt, err)
	}
	set, err := ParamSetMatching(m.Preset, m.Kappa, m.Dim, m.Payload, m.Fold, m.Fingerprint)
	if errors.Is(err, errFingerprint) {
		return nil, fmt.Errorf("%w: key metadata fingerprint %s does not match its parameters (%s)", errs.ErrMismatch, m.Fingerprint, set.Fingerprint())
	}
	if err != nil {
		return nil, fmt.Errorf("%w: key metadata: %v", errs.ErrCorrupt, err)
	}
	return set, nil
}

// errFingerprint is ParamSetMatching's error when no choice of moduli
// gives the fingerprint.
var errFingerprint = errors.New("no choice of moduli gives the fingerprint")

// ParamSetMatching is ParamSetWith for an artefact that states its
// parameters' fingerprint: the set of the first choice of moduli
// (params.AllModuli) whose fingerprint it is, so that key sets and indexes
// made before the default primes changed (params.ModuliAlternating) still
// open. With none, it returns the default choice's set and an error
// wrapping errFingerprint (test with IsFingerprintMismatch).
func ParamSetMatching(preset string, kappa, dim int, payload, fold bool, fingerprint string) (*params.Set, error) {
	var first *params.Set
	for _, moduli := range params.AllModuli {
		set, err := paramSetOf(preset, kappa, dim, payload, fold, moduli)
		if err != nil {
			return nil, err
		}
		if set.Fingerprint() == fingerprint {
			return set, nil
		}
		if first == nil {
			first = set
		}
	}
	return first, errFingerprint
}

// IsFingerprintMismatch reports whether err is ParamSetMatching's
// mismatch.
func IsFingerprintMismatch(err error) bool { return errors.Is(err, errFingerprint) }

// MaxDim bounds an embedding dimension read from metadata before it reaches
// params.New (whose padding to a power of two would overflow on a huge one):
// no preset has more slots than this.
const MaxDim = 1 << 16

// paramCache holds the parameter sets that metadata named lately.
var paramCache struct {
	sync.Mutex
	m map[paramKey]*params.Set
}

type paramKey struct {
	preset     string
	kappa, dim int
	payload    bool
	moduli     params.Moduli
}

// paramCacheSize bounds paramCache (a set at the default preset holds
// about 10 MB of NTT tables; a process uses one or two).
const paramCacheSize = 8

// ParamSet is params.New with a small process cache. Building a set
// generates its primes and NTT tables (77 ms for the toy preset, 150 ms for
// the default on the 2-core reference machine), and every load of keys or
// of an index rebuilds the set its metadata names. The dimension is
// checked first (CheckDim). The caller gets its own copy of the Set (the
// CKKS parameters inside are immutable and shared).
func ParamSet(preset string, kappa, dim int) (*params.Set, error) {
	return ParamSetWith(preset, kappa, dim, false, false)
}

// ParamSetWith is ParamSet for a set with or without the payload level,
// folded or not.
func ParamSetWith(preset string, kappa, dim int, payload, fold bool) (*params.Set, error) {
	return paramSetOf(preset, kappa, dim, payload, fold, params.ModuliBelow)
}

// paramSetOf is ParamSetWith for a given choice of moduli.
func paramSetOf(preset string, kappa, dim int, payload, fold bool, moduli params.Moduli) (*params.Set, error) {
	if err := CheckDim(dim); err != nil {
		return nil, err
	}
	key := paramKey{preset, kappa, dim, payload, moduli}
	paramCache.Lock()
	set, ok := paramCache.m[key]
	paramCache.Unlock()
	if !ok {
		var err error
		if set, err = params.NewWithModuli(preset, kappa, dim, payload, moduli); err != nil {
			return nil, err
		}
		paramCache.Lock()
		if paramCache.m == nil || len(paramCache.m) >= paramCacheSize {
			paramCache.m = map[paramKey]*params.Set{}
		}
		paramCache.m[key] = set
		paramCache.Unlock()
	}
	return set.WithFold(fold)
}

// CheckDim refuses a dimension outside [1, MaxDim].
func CheckDim(dim int) error {
	if dim < 1 || dim > MaxDim {
		return fmt.Errorf("embedding dimension %d outside [1, %d]", dim, MaxDim)
	}
	return nil
}

func (m *Meta) header(kind string) envelope.Header {
	return envelope.Header{Kind: kind, Fingerprint: m.Fingerprint, KeyID: m.KeyID}
}

// SimilarityStrategy rebuilds the strategy the keys were made for.
func (m *Meta) SimilarityStrategy(set *params.Set) (strategy.Strategy, error) {
	s, err := strategy.New(m.Strategy, m.N1, set.L())
	if err != nil {
		return s, fmt.Errorf("%w: key metadata: %v", errs.ErrCorrupt, err)
	}
	return s, nil
}

// GaloisElements lists the Galois elements a server needs: the strategy's
// rotations, the inner sum over all slots (membership) and, for a folded
// set, the conjugation (the real part of the folded scores).
func GaloisElements(set *params.Set, rotations []int) []uint64 {
	seen := map[uint64]bool{}
	if set.Fold {
		seen[set.CKKS.GaloisElementOrderTwoOrthogonalSubgroup()] = true
	}
	for _, g := range set.CKKS.GaloisElements(rotations) {
		seen[g] = true
	}
	for _, g := range rlwe.GaloisElementsForInnerSum(set.CKKS, 1, set.Slots()) {
		// Lattigo lists the rotation by all slots (the identity, element 1)
		// but never applies it when the slot count is a power of two.
		if g != 1 {
			seen[g] = true
		}
	}
	out := make([]uint64, 0, len(seen))
	for g := range seen {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Summary reports what Generate made.
type Summary struct {
	KeyID          string  `json:"key_id"`
	RotationKeys   int     `json:"rotation_keys"`
	ServerKeyBytes int64   `json:"server_key_bytes"`
	SecretKeyBytes int64   `json:"secret_key_bytes"`
	Seconds        float64 `json:"seconds"`
}

// Generate creates a key set for set in dir (which must not exist or be
// empty), with exactly the rotation keys that strategy strat needs plus
// those of the membership inner sum.
func Generate(dir string, set *params.Set, strat strategy.Strategy) (*Summary, error) {
	start := time.Now()
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("key directory %s already exists and is not empty: %w", dir, os.ErrExist)
	}
	parent := filepath.Dir(filepath.Clean(dir))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".keygen-*")
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o700); err != nil {
		return nil, err
	}
	id := make([]byte, 8)
	if _, err := rand.Read(id); err != nil {
		return nil, err
	}
	if strat.L != set.L() {
		return nil, fmt.Errorf("%w: strategy made for block size %d, parameters have %d", errs.ErrInvalid, strat.L, set.L())
	}
	rots := strat.Rotations()
	meta := &Meta{Format: formatV1, KeyID: hex.EncodeToString(id), Preset: set.Preset, Insecure: set.Insecure,
		Kappa: set.Kappa, Dim: set.Dim, Payload: set.Payload, Fold: set.Fold, Fingerprint: set.Fingerprint(), Strategy: strat.Name, N1: strat.N1,
		Rotations: rots, GaloisElements: GaloisElements(set, rots)}

	p := set.CKKS
	kgen := rlwe.NewKeyGenerator(p)
	sk, pk := kgen.GenKeyPairNew()
	srv := filepath.Join(tmp, ServerDir)
	if err := os.Mkdir(srv, 0o755); err != nil {
		return nil, err
	}
	write := func(path, kind string, obj interface{ MarshalBinary() ([]byte, error) }, perm os.FileMode) error {
		b, err := obj.MarshalBinary()
		if err != nil {
			return err
		}
		return envelope.WriteFile(path, meta.header(kind), b, perm)
	}
	if err := write(filepath.Join(tmp, secretFile), KindSecret, sk, 0o600); err != nil {
		return nil, err
	}
	if err := write(filepath.Join(srv, publicFile), KindPublic, pk, 0o644); err != nil {
		return nil, err
	}
	if err := write(filepath.Join(srv, relinFile), KindRelin, kgen.GenRelinearizationKeyNew(sk), 0o644); err != nil {
		return nil, err
	}
	if err := parallel.For(len(meta.GaloisElements), func(i int) error {
		g := meta.GaloisElements[i]
		return write(galoisPath(srv, g), KindGalois, kgen.GenGaloisKeyNew(g, sk), 0o644)
	}); err != nil {
		return nil, err
	}
	for _, f := range []string{filepath.Join(tmp, clientFile), filepath.Join(srv, metaFile)} {
		if err := envelope.WriteJSON(f, meta); err != nil {
			return nil, err
		}
	}
	if err := os.Remove(dir); err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return nil, err
	}
	ok = true
	if err := envelope.SyncDir(parent); err != nil {
		return nil, err
	}
	sum := &Summary{KeyID: meta.KeyID, RotationKeys: len(meta.GaloisElements), Seconds: time.Since(start).Seconds()}
	sum.ServerKeyBytes = dirBytes(filepath.Join(dir, ServerDir))
	if st, err := os.Stat(filepath.Join(dir, secretFile)); err == nil {
		sum.SecretKeyBytes = st.Size()
	}
	return sum, nil
}

func galoisPath(dir string, g uint64) string { return filepath.Join(dir, fmt.Sprintf("gal-%d.key", g)) }

func dirBytes(dir string) int64 {
	var n int64
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if info, err := e.Info(); err == nil {
			n += info.Size()
		}
	}
	return n
}

// ReadMeta reads client.json or server/keys.json.
func ReadMeta(path string) (*Meta, error) {
	m := new(Meta)
	if err := envelope.ReadJSON(path, "key metadata (is this a key directory?)", m); err != nil {
		return nil, err
	}
	return m, nil
}

// readKey reads a key file of the given kind and decodes it with decode.
// The file's payload must have exactly size bytes (the size of such a key
// under the key set's parameters): a file of another size is refused before
// it is read, and the decoder checks every length field before it
// allocates anything (package codec), so no field in the file sizes an
// allocation.
func readKey[K any](path string, meta *Meta, kind string, size int, decode func([]byte, rlwe.ParameterProvider, string) (K, error), set *params.Set) (K, error) {
	var zero K
	b, err := envelope.ReadFileSized(path, meta.header(kind), int64(size))
	if err != nil {
		return zero, err
	}
	return decode(b, set.CKKS, path)
}

// Client is what the key holder loads: parameters and the secret key.
type Client struct {
	Meta   *Meta
	Params *params.Set
	Secret *rlwe.SecretKey
}

// LoadClient loads a client key directory.
func LoadClient(dir string) (*Client, error) {
	meta, err := ReadMeta(filepath.Join(dir, clientFile))
	if err != nil {
		return nil, err
	}
	set, err := meta.Params()
	if err != nil {
		return nil, err
	}
	sk, err := readKey(filepath.Join(dir, secretFile), meta, KindSecret, codec.SecretKeySize(set.CKKS), codec.DecodeSecretKey, set)
	if err != nil {
		return nil, err
	}
	return &Client{Meta: meta, Params: set, Secret: sk}, nil
}

// Public is what an enroller loads: parameters and the public key.
type Public struct {
	Meta   *Meta
	Params *params.Set
	Key    *rlwe.PublicKey
}

// LoadServerMeta reads and checks the metadata of a server key directory
// and refuses one that holds a secret key.
func LoadServerMeta(dir string) (*Meta, *params.Set, error) {
	if _, err := os.Stat(filepath.Join(dir, secretFile)); err == nil {
		return nil, nil, fmt.Errorf("%w: %s holds a secret key: a server key directory must not", errs.ErrInvalid, dir)
	}
	meta, err := ReadMeta(filepath.Join(dir, metaFile))
	if err != nil {
		return nil, nil, err
	}
	set, err := meta.Params()
	if err != nil {
		return nil, nil, err
	}
	return meta, set, nil
}

// LoadPublic loads the public key of a server key directory.
func LoadPublic(dir string) (*Public, error) {
	meta, set, err := LoadServerMeta(dir)
	if err != nil {
		return nil, err
	}
	pk, err := readKey(filepath.Join(dir, publicFile), meta, KindPublic, codec.PublicKeySize(set.CKKS), codec.DecodePublicKey, set)
	if err != nil {
		return nil, err
	}
	return &Public{Meta: meta, Params: set, Key: pk}, nil
}

// Evaluation is what the server loads: parameters, relinearisation and
// rotation keys.
type Evaluation struct {
	Meta   *Meta
	Params *params.Set
	Keys   *rlwe.MemEvaluationKeySet
}

// LoadEvaluation loads the evaluation keys of a server key directory and
// checks that it holds every Galois key the strategy needs.
func LoadEvaluation(dir string) (*Evaluation, error) {
	meta, set, err := LoadServerMeta(dir)
	if err != nil {
		return nil, err
	}
	rlk, err := readKey(filepath.Join(dir, relinFile), meta, KindRelin, codec.RelinearizationKeySize(set.CKKS), codec.DecodeRelinearizationKey, set)
	if err != nil {
		return nil, err
	}
	strat, err := meta.SimilarityStrategy(set)
	if err != nil {
		return nil, err
	}
	need := GaloisElements(set, strat.Rotations())
	gks := make([]*rlwe.GaloisKey, len(need))
	gkSize := codec.GaloisKeySize(set.CKKS)
	if err := parallel.For(len(need), func(i int) error {
		path := galoisPath(dir, need[i])
		if _, err := os.Stat(path); os.IsNotExist(err) {
			return fmt.Errorf("%w: rotation key %s is missing: the key set does not fit the %s strategy", errs.ErrMismatch, filepath.Base(path), strat)
		}
		gk, err := readKey(path, meta, KindGalois, gkSize, codec.DecodeGaloisKey, set)
		if err != nil {
			return err
		}
		if gk.GaloisElement != need[i] {
			return fmt.Errorf("%w: %s holds the key of Galois element %d", errs.ErrCorrupt, path, gk.GaloisElement)
		}
		gks[i] = gk
		return nil
	}); err != nil {
		return nil, err
	}
	return &Evaluation{Meta: meta, Params: set, Keys: rlwe.NewMemEvaluationKeySet(rlk, gks...)}, nil
}
