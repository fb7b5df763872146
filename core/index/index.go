// Package index is the enroller's side and the on-disk format of an
// encrypted gallery: a directory with a manifest and one file per group of
// `slots` vectors, each group holding the l diagonal ciphertexts of the
// HyDia layout (package packing), encrypted under the client's public key
// or, when the enroller owns the key set, under the secret key with seeded
// uniform halves (package seeded: half the bytes).
//
//	index_dir/manifest.json       parameters, key id, threshold, uid, groups
//	index_dir/group-000000.ct     l ciphertexts, framed and checksummed
//
// Labels (names) are not the index's: the key holder seals them
// (python/encmatch/labels.py, index_dir/labels/) and the core never sees
// them. The threshold delta is fixed at creation: every search uses it.
//
// Every write is atomic and the manifest is rewritten only after a group file
// is complete, so a crash during enrollment loses at most the group in
// flight: the manifest never names a partial group, and files it does not
// name are removed by the next enrollment.
package index

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"encmatch/core/codec"
	"encmatch/core/comparator"
	"encmatch/core/envelope"
	"encmatch/core/errs"
	"encmatch/core/keys"
	"encmatch/core/packing"
	"encmatch/core/parallel"
	"encmatch/core/params"
	"encmatch/core/seeded"
	"encmatch/core/strategy"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

const (
	manifestFile = "manifest.json"
	formatV1     = 1
	// KindGroup is the envelope kind of a group file.
	KindGroup = "gallery-group"
)

// Group is one group file of the manifest.
type Group struct {
	File  string `json:"file"`
	Start int    `json:"start"` // gallery position of slot 0
	Count int    `json:"count"` // vectors in the group (<= slots)
	Bytes int64  `json:"bytes"`
	// Seeded groups store only c0 of each diagonal and the seed from which
	// the reader regenerates c1 (secret-key enrollment).
	Seeded bool `json:"seeded,omitempty"`
}

// Manifest describes an index.
type Manifest struct {
	Format      int                `json:"format"`
	Strategy    string             `json:"strategy"`
	N1          int                `json:"n1"`
	KeyID       string             `json:"key_id"`
	Fingerprint string             `json:"fingerprint"`
	Params      params.Description `json:"params"`
	Delta       float64            `json:"delta"`
	ScoreScale  float64            `json:"score_scale"`
	Count       int                `json:"count"`
	Groups      []Group            `json:"groups"`
	// UID is a random identifier made at creation: sealed labels name it
	// in their associated data, so labels of another index are refused.
	UID string `json:"uid,omitempty"`
}

// groupHeader is the envelope header of group g's file. Its kind names the
// diagonal layout (pre-rotated for bsgs-tbe, with n1) and the storage
// (seeded or not), so that a manifest edited to another layout no longer
// opens its groups.
func (m *Manifest) groupHeader(g Group) envelope.Header {
	kind := KindGroup + "/plain"
	if m.Strategy == strategy.BSGSTBE {
		kind = fmt.Sprintf("%s/prerotated-n1=%d", KindGroup, m.N1)
	}
	if g.Seeded {
		kind += "/seeded"
	}
	return m.Header(kind)
}

// Header is the envelope header of this index's files.
func (m *Manifest) Header(kind string) envelope.Header {
	return envelope.Header{Kind: kind, Fingerprint: m.Fingerprint, KeyID: m.KeyID}
}

// CheckKeys refuses a key set other than the one the index was made with.
func (m *Manifest) CheckKeys(meta *keys.Meta) error {
	if meta.Fingerprint != m.Fingerprint {
		return fmt.Errorf("%w: the keys were made with other parameters (%s, kappa=%d, dim=%d) than the index (%s, kappa=%d, dim=%d)",
			errs.ErrMismatch, meta.Preset, meta.Kappa, meta.Dim, m.Params.Preset, m.Params.Kappa, m.Params.Dim)
	}
	if meta.KeyID != m.KeyID {
		return fmt.Errorf("%w: the index was encrypted under key set %s, not %s", errs.ErrMismatch, m.KeyID, meta.KeyID)
	}
	if meta.Strategy != m.Strategy || meta.N1 != m.N1 {
		return fmt.Errorf("%w: the index was made for strategy %s with n1=%d, the keys for %s with n1=%d", errs.ErrMismatch, m.Strategy, m.N1, meta.Strategy, meta.N1)
	}
	return nil
}

// SimilarityStrategy is the strategy the index was made for.
func (m *Manifest) SimilarityStrategy() (strategy.Strategy, error) {
	return strategy.New(m.Strategy, m.N1, m.Params.PaddedDim)
}

// ParamSet rebuilds the parameter set of the manifest.
func (m *Manifest) ParamSet() (*params.Set, error) {
	set, err := keys.ParamSet(m.Params.Preset, m.Params.Kappa, m.Params.Dim)
	if err != nil {
		return nil, fmt.Errorf("%w: manifest parameters: %v", errs.ErrCorrupt, err)
	}
	if set.Fingerprint() != m.Fingerprint {
		return nil, fmt.Errorf("%w: manifest fingerprint does not match its parameters", errs.ErrCorrupt)
	}
	return set, nil
}

// validate checks the manifest's internal consistency: the cheap checks
// first, then the parameter set it names (a cached build, see
// keys.ParamSet), against which the groups and the block size are checked.
func (m *Manifest) validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: manifest: %s", errs.ErrCorrupt, fmt.Sprintf(format, a...))
	}
	if m.Format != formatV1 {
		return bad("unsupported format %d", m.Format)
	}
	if err := CheckDelta(m.Delta); err != nil {
		return bad("%v", err)
	}
	if err := comparator.Check(m.Params.Kappa, m.Delta, m.ScoreScale); err != nil {
		return bad("%v", err)
	}
	if err := keys.CheckDim(m.Params.Dim); err != nil {
		return bad("%v", err)
	}
	if m.Params.PaddedDim != params.PaddedDim(m.Params.Dim) {
		return bad("padded dimension %d for dimension %d", m.Params.PaddedDim, m.Params.Dim)
	}
	next := 0
	for i, g := range m.Groups {
		if g.Start != next || g.Count < 1 || g.Count > MaxGroupSize || g.File != groupFile(i) {
			return bad("group %d is inconsistent (start %d, count %d, file %q)", i, g.Start, g.Count, g.File)
		}
		next += g.Count
	}
	if next != m.Count {
		return bad("groups hold %d vectors, count says %d", next, m.Count)
	}
	if _, err := m.SimilarityStrategy(); err != nil {
		return bad("%v", err)
	}
	set, err := m.ParamSet()
	if err != nil {
		return err
	}
	for i, g := range m.Groups {
		if g.Count > set.Slots() {
			return bad("group %d holds %d vectors, more than the %d slots", i, g.Count, set.Slots())
		}
	}
	return nil
}

// MaxGroupSize bounds the vectors of one group before the parameters are
// known: no preset has more slots.
const MaxGroupSize = 1 << 16

func groupFile(i int) string { return fmt.Sprintf("group-%06d.ct", i) }

// CheckDelta refuses a threshold that is not a finite cosine similarity in
// the open interval (-1, 1).
func CheckDelta(delta float64) error {
	if math.IsNaN(delta) || math.IsInf(delta, 0) || delta <= -1 || delta >= 1 {
		return fmt.Errorf("%w: delta must be a finite cosine similarity in the open interval (-1, 1), got %v", errs.ErrInvalid, delta)
	}
	return nil
}

// Create makes an empty index bound to a server key set, with threshold
// delta: the only one its searches will ever use.
func Create(dir, serverKeyDir string, delta float64) (*Manifest, error) {
	meta, set, err := keys.LoadServerMeta(serverKeyDir)
	if err != nil {
		return nil, err
	}
	if err := CheckDelta(delta); err != nil {
		return nil, err
	}
	if err := comparator.Check(set.Kappa, delta, comparator.DefaultScoreScale); err != nil {
		return nil, fmt.Errorf("%w: %v", errs.ErrInvalid, err)
	}
	var uid [16]byte
	if _, err := rand.Read(uid[:]); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, manifestFile)); err == nil {
		return nil, fmt.Errorf("index %s already exists: %w", dir, os.ErrExist)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if _, err := meta.SimilarityStrategy(set); err != nil {
		return nil, err
	}
	m := &Manifest{Format: formatV1, Strategy: meta.Strategy, N1: meta.N1, KeyID: meta.KeyID, Fingerprint: meta.Fingerprint,
		Params: set.Describe(), Delta: delta, ScoreScale: comparator.DefaultScoreScale, Groups: []Group{},
		UID: hex.EncodeToString(uid[:])}
	return m, envelope.WriteJSON(filepath.Join(dir, manifestFile), m)
}

// Load reads and checks an index's manifest.
func Load(dir string) (*Manifest, error) {
	path := filepath.Join(dir, manifestFile)
	m := new(Manifest)
	if err := envelope.ReadJSON(path, "index manifest", m); err != nil {
		return nil, err
	}
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// ParseManifest decodes and checks a manifest from untrusted JSON (Load
// without the file).
func ParseManifest(b []byte) (*Manifest, error) {
	m := new(Manifest)
	if err := json.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("%w: manifest: %v", errs.ErrCorrupt, err)
	}
	if err := m.validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// EnrollSummary reports an enrollment.
type EnrollSummary struct {
	Added         int     `json:"added"`
	Total         int     `json:"total"`
	GroupsWritten int     `json:"groups_written"`
	Bytes         int64   `json:"bytes"`
	Seconds       float64 `json:"seconds"`
}

// Enroll validates, normalises, packs and encrypts n vectors of dimension
// dim (row-major in data) under the public key and appends them to the
// index as new groups. Nothing is written unless every vector is valid.
func Enroll(dir string, pub *keys.Public, data []float32, n, dim int) (*EnrollSummary, error) {
	enc := rlwe.NewEncryptor(pub.Params.CKKS, pub.Key)
	return enroll(dir, pub.Meta, pub.Params, data, n, dim, func() (groupEncryptor, error) {
		return publicKeyGroup{enc}, nil
	})
}

// EnrollSeeded is Enroll for the owner of the key set: it encrypts under the
// secret key with the uniform halves derived from a fresh random seed per
// group, and stores only the other halves and the seed (half the bytes of
// Enroll). The server, which never sees the secret key, regenerates the
// uniform halves when it reads the group.
func EnrollSeeded(dir string, owner *keys.Client, data []float32, n, dim int) (*EnrollSummary, error) {
	enc := seeded.NewEncryptor(owner.Params.CKKS, owner.Secret)
	return enroll(dir, owner.Meta, owner.Params, data, n, dim, func() (groupEncryptor, error) {
		seed, err := seeded.NewSeed()
		return seededGroup{enc, seed}, err
	})
}

// groupEncryptor encrypts the diagonals of one group.
type groupEncryptor interface {
	encrypt(pt *rlwe.Plaintext, diagonal int) (*rlwe.Ciphertext, error)
	// seed is the group's seed, nil when its ciphertexts are stored whole.
	seed() *seeded.Seed
}

type publicKeyGroup struct{ enc *rlwe.Encryptor }

func (g publicKeyGroup) encrypt(pt *rlwe.Plaintext, _ int) (*rlwe.Ciphertext, error) {
	return g.enc.EncryptNew(pt)
}

func (publicKeyGroup) seed() *seeded.Seed { return nil }

type seededGroup struct {
	enc *seeded.Encryptor
	s   seeded.Seed
}

func (g seededGroup) encrypt(pt *rlwe.Plaintext, diagonal int) (*rlwe.Ciphertext, error) {
	return g.enc.Encrypt(pt, g.s, uint64(diagonal))
}

func (g seededGroup) seed() *seeded.Seed { return &g.s }

// enroll is Enroll and EnrollSeeded; newGroup gives the encryptor of each
// new group.
func enroll(dir string, meta *keys.Meta, set *params.Set, data []float32, n, dim int,
	newGroup func() (groupEncryptor, error)) (*EnrollSummary, error) {
	start := time.Now()
	m, err := Load(dir)
	if err != nil {
		return nil, err
	}
	if err := m.CheckKeys(meta); err != nil {
		return nil, err
	}
	if dim != set.Dim {
		return nil, fmt.Errorf("%w: vectors have dimension %d, the index expects %d", errs.ErrInvalid, dim, set.Dim)
	}
	if n < 1 || len(data) != n*dim {
		return nil, fmt.Errorf("%w: %d values for %d vectors of dimension %d", errs.ErrInvalid, len(data), n, dim)
	}
	l, slots := set.L(), set.Slots()
	vecs := make([][]float64, n)
	for i := range vecs {
		if vecs[i], err = packing.Normalize(data[i*dim:(i+1)*dim], dim, l, i); err != nil {
			return nil, fmt.Errorf("%w: %v", errs.ErrInvalid, err)
		}
	}
	removeStrayFiles(dir, m)

	strat, err := m.SimilarityStrategy()
	if err != nil {
		return nil, err
	}
	ecd := ckks.NewEncoder(set.CKKS)
	sum := &EnrollSummary{Added: n}
	for lo := 0; lo < n; lo += slots {
		hi := min(lo+slots, n)
		diags, err := packing.Diagonals(vecs[lo:hi], l, slots, m.ScoreScale)
		if err != nil {
			return nil, err
		}
		genc, err := newGroup()
		if err != nil {
			return nil, err
		}
		cts := make([]*rlwe.Ciphertext, l)
		if err := parallel.For(l, func(i int) error {
			d := diags[i]
			if strat.PreRotatedByEnroller() {
				d = packing.Rotate(d, strat.PreRotation(i))
			}
			pt := ckks.NewPlaintext(set.CKKS, set.CKKS.MaxLevel())
			if err := ecd.Encode(d, pt); err != nil {
				return err
			}
			cts[i], err = genc.encrypt(pt, i)
			return err
		}); err != nil {
			return nil, fmt.Errorf("encrypting group: %w", err)
		}
		g := Group{File: groupFile(len(m.Groups)), Start: m.Count, Count: hi - lo, Seeded: genc.seed() != nil}
		if g.Bytes, err = writeGroup(filepath.Join(dir, g.File), m, g, set.CKKS, cts, genc.seed()); err != nil {
			return nil, err
		}
		m.Groups = append(m.Groups, g)
		m.Count += g.Count
		if err := envelope.WriteJSON(filepath.Join(dir, manifestFile), m); err != nil {
			return nil, err
		}
		sum.GroupsWritten++
		sum.Bytes += g.Bytes
	}
	sum.Total = m.Count
	sum.Seconds = time.Since(start).Seconds()
	return sum, nil
}

// removeStrayFiles deletes temporary files and group files that the
// manifest does not name (left by an interrupted enrollment).
func removeStrayFiles(dir string, m *Manifest) {
	envelope.RemoveTemps(dir)
	named := map[string]bool{}
	for _, g := range m.Groups {
		named[g.File] = true
	}
	files, _ := filepath.Glob(filepath.Join(dir, "group-*.ct"))
	for _, f := range files {
		if !named[filepath.Base(f)] {
			os.Remove(f)
		}
	}
}

// writeGroup writes group g's diagonals; with a seed, the seed and only
// the c0 half of each ciphertext.
func writeGroup(path string, m *Manifest, g Group, p ckks.Parameters, cts []*rlwe.Ciphertext, seed *seeded.Seed) (int64, error) {
	err := envelope.WriteFileStream(path, m.groupHeader(g), groupPayload(p, len(cts), cts[0].Level(), seed != nil), 0o644, func(w io.Writer) error {
		if seed != nil {
			if _, err := w.Write(record(seed[:])); err != nil {
				return err
			}
		}
		for _, ct := range cts {
			if seed != nil {
				ct = &rlwe.Ciphertext{Element: rlwe.Element[ring.Poly]{Value: ct.Value[:1], MetaData: ct.MetaData}}
			}
			b, err := codec.PackCiphertext(ct, p)
			if err != nil {
				return err
			}
			if _, err := w.Write(record(b)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("writing %s: %w", path, err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// A group payload is a sequence of records: u64 length | bytes | u32
// CRC-32C of the bytes. A seeded group starts with a record holding the
// seed; then each diagonal is one record holding the ciphertext with
// bit-packed coefficients (codec.PackCiphertext), only its c0 half when
// seeded. The file's SHA-256 (envelope) covers the whole group; the
// per-record CRC lets a streamed read check every ciphertext in one pass.
const recordOverhead = 8 + 4

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func record(b []byte) []byte {
	rec := envelope.AppendChunk(make([]byte, 0, len(b)+recordOverhead), b)
	return binary.LittleEndian.AppendUint32(rec, crc32.Checksum(b, castagnoli))
}

// storedDegree is the degree of the stored part of a diagonal.
func storedDegree(seededGroup bool) int {
	if seededGroup {
		return 0
	}
	return 1
}

// groupPayload is the payload size of a group of l diagonals at level.
func groupPayload(p ckks.Parameters, l, level int, seededGroup bool) int64 {
	n := int64(l) * int64(recordOverhead+codec.PackedSize(p, storedDegree(seededGroup), level))
	if seededGroup {
		n += recordOverhead + seeded.SeedSize
	}
	return n
}

// BytesPerGroup is the size of a group file's payload at the parameters of
// set: stored whole (public-key enrollment) or seeded (secret-key).
func BytesPerGroup(set *params.Set, seededGroup bool) int64 {
	return groupPayload(set.CKKS, set.L(), set.CKKS.MaxLevel(), seededGroup)
}

// LoadGroup reads group g after verifying the whole file's SHA-256.
func LoadGroup(dir string, m *Manifest, set *params.Set, g Group) ([]*rlwe.Ciphertext, error) {
	path := filepath.Join(dir, g.File)
	var cts []*rlwe.Ciphertext
	err := envelope.ReadFileStream(path, m.groupHeader(g), func(r io.Reader, n int64) error {
		return readRecords(r, n, set, g, set.L(), func(first int, chunk []*rlwe.Ciphertext) error {
			cts = append(cts, chunk...)
			return nil
		})
	})
	if err != nil {
		return nil, groupError(path, err)
	}
	return cts, nil
}

// StreamGroup reads group g in one pass, checking each ciphertext's CRC-32C
// and layout, and hands the diagonals to emit in chunks of chunk
// ciphertexts (first is the index of the chunk's first diagonal). Used when
// the index does not fit in memory.
func StreamGroup(dir string, m *Manifest, set *params.Set, g Group, chunk int, emit func(first int, cts []*rlwe.Ciphertext) error) error {
	path := filepath.Join(dir, g.File)
	ps, err := envelope.OpenPayload(path, m.groupHeader(g))
	if err != nil {
		return groupError(path, err)
	}
	defer ps.Close()
	if err := readRecords(ps, ps.Len, set, g, chunk, emit); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func groupError(path string, err error) error {
	if os.IsNotExist(err) {
		return fmt.Errorf("%w: group file %s named by the manifest is missing", errs.ErrCorrupt, path)
	}
	return err
}

// readRecord reads one record of exactly size bytes into buf and checks
// its CRC.
func readRecord(r io.Reader, buf []byte, size int, what string) ([]byte, error) {
	buf = buf[:recordOverhead+size]
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, fmt.Errorf("%w: %v", errs.ErrCorrupt, err)
	}
	b, rest, err := envelope.NextChunk(buf)
	if err != nil || len(b) != size || len(rest) != 4 {
		return nil, fmt.Errorf("%w: %s has the wrong size", errs.ErrCorrupt, what)
	}
	if crc32.Checksum(b, castagnoli) != binary.LittleEndian.Uint32(rest) {
		return nil, fmt.Errorf("%w: %s fails its CRC-32C", errs.ErrCorrupt, what)
	}
	return b, nil
}

// readRecords decodes the l diagonal records of a group payload,
// regenerating the uniform halves of a seeded group.
func readRecords(r io.Reader, n int64, set *params.Set, g Group, chunk int, emit func(int, []*rlwe.Ciphertext) error) error {
	p, l, level := set.CKKS, set.L(), set.CKKS.MaxLevel()
	if want := groupPayload(p, l, level, g.Seeded); n != want {
		return fmt.Errorf("%w: %d payload bytes, expected %d for %d diagonals", errs.ErrCorrupt, n, want, l)
	}
	size := codec.PackedSize(p, storedDegree(g.Seeded), level)
	buf := make([]byte, recordOverhead+max(size, seeded.SeedSize))
	var seed seeded.Seed
	if g.Seeded {
		b, err := readRecord(r, buf, seeded.SeedSize, "the seed")
		if err != nil {
			return err
		}
		copy(seed[:], b)
	}
	rq := p.RingQ().AtLevel(level)
	var batch []*rlwe.Ciphertext
	first := 0
	for i := 0; i < l; i++ {
		what := fmt.Sprintf("%s diagonal %d", g.File, i)
		b, err := readRecord(r, buf, size, what)
		if err != nil {
			return err
		}
		ct, err := codec.UnpackCiphertext(b, p, storedDegree(g.Seeded), level, what)
		if err != nil {
			return err
		}
		if g.Seeded {
			c1 := rq.NewPoly()
			seeded.Mask(rq, seed, uint64(i), c1)
			ct.Value = append(ct.Value, c1)
		}
		batch = append(batch, ct)
		if len(batch) == chunk || i == l-1 {
			if err := emit(first, batch); err != nil {
				return err
			}
			first, batch = i+1, nil
		}
	}
	return nil
}
