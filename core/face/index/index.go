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
// An enrollment first fills the last group when it has room: the group is
// rewritten whole to a new file name (group-000000.fill-1.ct, ...), holding
// what it held plus the new entries (encryption is linear: the old
// ciphertexts plus an encryption of the new entries' diagonals, or, for the
// key owner, a fresh seeded encryption of both; docs/STORAGE.md), then the
// manifest is rewritten to name it, then the old file is removed. Further
// entries go to new groups.
//
// Every write is atomic and the manifest is rewritten only after a group file
// is complete, so a crash during enrollment loses at most the group in
// flight: the manifest never names a partial group nor a file holding
// entries it does not count, and files it does not name are removed by the
// next enrollment.
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
	"strings"
	"time"

	"encmatch/core/base/codec"
	"encmatch/core/base/comparator"
	"encmatch/core/base/envelope"
	"encmatch/core/base/errs"
	"encmatch/core/base/packing"
	"encmatch/core/base/parallel"
	"encmatch/core/base/params"
	"encmatch/core/face/keys"
	"encmatch/core/face/payload"
	"encmatch/core/face/seeded"
	"encmatch/core/face/strategy"

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
	// Fills counts the enrollments that filled this group after it was
	// made; each wrote the group whole to a new file (groupFile). A filled
	// group's file names its fill and count in its envelope kind.
	Fills int `json:"fills,omitempty"`
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
	// PayloadWidth is the number of int16 values enrolled beside each
	// vector (0: none), fetched by mode "payload" (package payload).
	PayloadWidth int `json:"payload_width,omitempty"`
	// Rule is the threshold rule fixed at creation: ">=" (a score equal to
	// delta matches) or ">" (it does not); without one, ">=". The
	// comparator's transition is centred at delta whatever the rule: a
	// score within the decision band of delta (about 1e-6) decrypts to a
	// value that is not clean, reported as uncertain and decided by the
	// rule (result.Read), never to a clean wrong bit.
	Rule string `json:"rule,omitempty"`
}

// Threshold rules.
const (
	RuleAtLeast = ">="
	RuleAbove   = ">"
)

// MaxPayloadWidth bounds the int16 values per record.
const MaxPayloadWidth = payload.MaxWidth

// PayloadBandLimit is the widest comparator value band (in cosine units,
// each side of delta) at which payload answers are expected to be whole:
// a match inside the band leaves its payload undecoded (flagged, the
// answer incomplete).
const PayloadBandLimit = 0.02

// Warnings are what a new index's creator should know: a payload index
// whose comparator's value band at delta is wider than PayloadBandLimit
// (kappa below 12) flags every match within that band as uncertain.
func (m *Manifest) Warnings() []string {
	if m.PayloadWidth == 0 {
		return nil
	}
	c, err := comparator.New(m.Params.Kappa, m.Delta, m.ScoreScale)
	if err != nil || c.ValueBand <= PayloadBandLimit {
		return nil
	}
	return []string{fmt.Sprintf("kappa %d: the comparator's value band at delta %v is +-%.3f; every record scoring within it "+
		"comes back undecoded (the payload answer flagged incomplete). Use kappa 12 or more for a band within +-%v",
		m.Params.Kappa, m.Delta, c.ValueBand, PayloadBandLimit)}
}

// Matches is the rule applied to an exact score: what brute force says.
func (m *Manifest) Matches(score float64) bool {
	if m.Rule == RuleAbove {
		return score > m.Delta
	}
	return score >= m.Delta
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
	if m.PayloadWidth > 0 {
		kind += fmt.Sprintf("/payload=%d", m.PayloadWidth)
	}
	if g.Fills > 0 {
		// A filled group's file says which version it is and how many
		// entries it holds: a manifest naming it with another count (or an
		// older file under its name) is refused. Unfilled groups keep the
		// kinds of the files written before fills existed.
		kind += fmt.Sprintf("/fill=%d/count=%d", g.Fills, g.Count)
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
	set, err := keys.ParamSetWith(m.Params.Preset, m.Params.Kappa, m.Params.Dim, m.Params.Payload)
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
	if err := comparator.Check(m.Params.Kappa, m.Delta, m.ScoreScale); err != nil {
		return bad("%v", err)
	}
	if m.Rule != "" && m.Rule != RuleAtLeast && m.Rule != RuleAbove {
		return bad("unknown threshold rule %q", m.Rule)
	}
	if m.PayloadWidth < 0 || m.PayloadWidth > MaxPayloadWidth || (m.PayloadWidth > 0 && !m.Params.Payload) {
		return bad("payload width %d (at most %d, and only with the payload level)", m.PayloadWidth, MaxPayloadWidth)
	}
	if err := keys.CheckDim(m.Params.Dim); err != nil {
		return bad("%v", err)
	}
	if m.Params.PaddedDim != params.PaddedDim(m.Params.Dim) {
		return bad("padded dimension %d for dimension %d", m.Params.PaddedDim, m.Params.Dim)
	}
	next := 0
	for i, g := range m.Groups {
		if g.Start != next || g.Count < 1 || g.Count > MaxGroupSize || g.Fills < 0 || g.Fills > MaxGroupSize || g.File != groupFile(i, g.Fills) {
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

// groupFile names the file of group i after fills fills: a fill writes the
// group to a new name, so that the manifest switches to it atomically.
func groupFile(i, fills int) string {
	if fills == 0 {
		return fmt.Sprintf("group-%06d.ct", i)
	}
	return fmt.Sprintf("group-%06d.fill-%d.ct", i, fills)
}

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
	return CreateWith(dir, serverKeyDir, delta, CreateOptions{})
}

// CreateOptions are the choices fixed when an index is created.
type CreateOptions struct {
	// PayloadWidth int16 values enrolled beside each vector (0: none); it
	// needs a key set with the payload level.
	PayloadWidth int
	// Rule is RuleAtLeast or RuleAbove, or none (">=").
	Rule string
}

// CreateWith is Create with options.
func CreateWith(dir, serverKeyDir string, delta float64, opt CreateOptions) (*Manifest, error) {
	meta, set, err := keys.LoadServerMeta(serverKeyDir)
	if err != nil {
		return nil, err
	}
	if err := CheckDelta(delta); err != nil {
		return nil, err
	}
	if opt.Rule != "" && opt.Rule != RuleAtLeast && opt.Rule != RuleAbove {
		return nil, fmt.Errorf("%w: threshold rule %q (want %q or %q)", errs.ErrInvalid, opt.Rule, RuleAtLeast, RuleAbove)
	}
	if opt.PayloadWidth < 0 || opt.PayloadWidth > MaxPayloadWidth {
		return nil, fmt.Errorf("%w: payload width %d outside [0, %d]", errs.ErrInvalid, opt.PayloadWidth, MaxPayloadWidth)
	}
	if opt.PayloadWidth > 0 && !set.Payload {
		return nil, fmt.Errorf("%w: payloads need a key set with the payload level (keygen with payload), and %s has none", errs.ErrInvalid, serverKeyDir)
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
		UID: hex.EncodeToString(uid[:]), PayloadWidth: opt.PayloadWidth, Rule: opt.Rule}
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
	Added int `json:"added"`
	Total int `json:"total"`
	// GroupsWritten counts the group files written: new groups and filled ones.
	GroupsWritten int `json:"groups_written"`
	// GroupsFilled counts the existing groups filled (rewritten whole).
	GroupsFilled int `json:"groups_filled"`
	// GroupsNew counts the groups added.
	GroupsNew int `json:"groups_new"`
	// Bytes is the size of the files written (a filled group counts whole).
	Bytes int64 `json:"bytes"`
	// Growth is what the index grew on disk: Bytes less the files replaced.
	Growth  int64   `json:"growth"`
	Seconds float64 `json:"seconds"`
	// GroupSlots is the capacity of a group (the parameters' slots).
	GroupSlots int `json:"group_slots"`
	// Writes lists the groups written, in order.
	Writes []GroupWrite `json:"group_writes"`
}

// GroupWrite is one group file an enrollment wrote.
type GroupWrite struct {
	Group  int   `json:"group"`  // position in the manifest's group list
	Filled bool  `json:"filled"` // an existing group filled, not a new one
	Added  int   `json:"added"`  // entries this enrollment put there
	Count  int   `json:"count"`  // entries the group holds now
	Bytes  int64 `json:"bytes"`  // size of its file
	Seeded bool  `json:"seeded"`
}

// EnrollOptions tunes an enrollment.
type EnrollOptions struct {
	// NewGroups puts every vector in new groups even when the last group
	// has room: for an enroller that does not hold the group files (the
	// service's staging directory holds only the manifest).
	NewGroups bool
	// Payloads are the n x PayloadWidth int16 values of the vectors,
	// row-major: required by an index with payloads, refused by one without.
	Payloads []int16
}

// Enroll validates, normalises, packs and encrypts n vectors of dimension
// dim (row-major in data) under the public key and appends them to the
// index: first into the last group while it has room (a seeded group it
// fills is then stored whole: this enroller cannot make seeded
// ciphertexts), then as new groups. Nothing is written unless every vector
// is valid.
func Enroll(dir string, pub *keys.Public, data []float32, n, dim int) (*EnrollSummary, error) {
	return EnrollWith(dir, pub, data, n, dim, EnrollOptions{})
}

// EnrollWith is Enroll with options.
func EnrollWith(dir string, pub *keys.Public, data []float32, n, dim int, opt EnrollOptions) (*EnrollSummary, error) {
	enc := rlwe.NewEncryptor(pub.Params.CKKS, pub.Key)
	return enroll(dir, pub.Meta, pub.Params, data, n, dim, opt, func() (groupEncryptor, error) {
		return publicKeyGroup{enc, pub.Params.CKKS}, nil
	})
}

// EnrollSeeded is Enroll for the owner of the key set: it encrypts under the
// secret key with the uniform halves derived from a fresh random seed per
// group, and stores only the other halves and the seed (half the bytes of
// Enroll). The server, which never sees the secret key, regenerates the
// uniform halves when it reads the group. A group it fills is re-encrypted
// under a fresh seed (seeded.EncryptSum), whatever its storage was.
func EnrollSeeded(dir string, owner *keys.Client, data []float32, n, dim int) (*EnrollSummary, error) {
	return EnrollSeededWith(dir, owner, data, n, dim, EnrollOptions{})
}

// EnrollSeededWith is EnrollSeeded with options.
func EnrollSeededWith(dir string, owner *keys.Client, data []float32, n, dim int, opt EnrollOptions) (*EnrollSummary, error) {
	enc := seeded.NewEncryptor(owner.Params.CKKS, owner.Secret)
	return enroll(dir, owner.Meta, owner.Params, data, n, dim, opt, func() (groupEncryptor, error) {
		seed, err := seeded.NewSeed()
		return seededGroup{enc, seed}, err
	})
}

// groupEncryptor encrypts the diagonals of one group.
type groupEncryptor interface {
	encrypt(pt *rlwe.Plaintext, diagonal int) (*rlwe.Ciphertext, error)
	// fill returns diagonal i of a filled group: a ciphertext of what old
	// holds plus pt (old may be overwritten).
	fill(old *rlwe.Ciphertext, pt *rlwe.Plaintext, diagonal int) (*rlwe.Ciphertext, error)
	// seed is the group's seed, nil when its ciphertexts are stored whole.
	seed() *seeded.Seed
}

type publicKeyGroup struct {
	enc *rlwe.Encryptor
	p   ckks.Parameters
}

func (g publicKeyGroup) encrypt(pt *rlwe.Plaintext, _ int) (*rlwe.Ciphertext, error) {
	return g.enc.EncryptNew(pt)
}

// fill adds a fresh public-key encryption of pt to old (Lattigo's ring
// addition on both halves; a seeded old has its regenerated c1).
func (g publicKeyGroup) fill(old *rlwe.Ciphertext, pt *rlwe.Plaintext, _ int) (*rlwe.Ciphertext, error) {
	ct, err := g.enc.EncryptNew(pt)
	if err != nil {
		return nil, err
	}
	if old.Degree() != 1 || old.Level() != ct.Level() || !old.IsNTT || old.Scale.Cmp(ct.Scale) != 0 {
		return nil, fmt.Errorf("%w: a stored diagonal (degree %d, level %d) does not match a fresh one (level %d)", errs.ErrCorrupt, old.Degree(), old.Level(), ct.Level())
	}
	rq := g.p.RingQ().AtLevel(ct.Level())
	for k := range ct.Value {
		rq.Add(old.Value[k], ct.Value[k], old.Value[k])
	}
	return old, nil
}

func (publicKeyGroup) seed() *seeded.Seed { return nil }

type seededGroup struct {
	enc *seeded.Encryptor
	s   seeded.Seed
}

func (g seededGroup) encrypt(pt *rlwe.Plaintext, diagonal int) (*rlwe.Ciphertext, error) {
	return g.enc.Encrypt(pt, g.s, uint64(diagonal))
}

func (g seededGroup) fill(old *rlwe.Ciphertext, pt *rlwe.Plaintext, diagonal int) (*rlwe.Ciphertext, error) {
	return g.enc.EncryptSum(old, pt, g.s, uint64(diagonal))
}

func (g seededGroup) seed() *seeded.Seed { return &g.s }

// enroll is Enroll and EnrollSeeded; newGroup gives the encryptor of each
// group written (new or filled), with a fresh seed when seeded.
func enroll(dir string, meta *keys.Meta, set *params.Set, data []float32, n, dim int, opt EnrollOptions,
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
	if pw := m.PayloadWidth; len(opt.Payloads) != n*pw {
		if pw == 0 {
			return nil, fmt.Errorf("%w: the index holds no payloads (it was created without a payload width), %d payload values given", errs.ErrInvalid, len(opt.Payloads))
		}
		return nil, fmt.Errorf("%w: %d payload values for %d vectors of %d payload values each", errs.ErrInvalid, len(opt.Payloads), n, pw)
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
	// plaintext encodes record i of a group: diagonal i (i < l) as the
	// layout wants it (pre-rotated for bsgs-tbe), at the top level and
	// default scale, or payload column i-l at the payload level and
	// payload.PayloadScale.
	plaintext := func(src groupPlain, i int) (*rlwe.Plaintext, error) {
		if i >= l {
			pt := ckks.NewPlaintext(set.CKKS, PayloadLevel)
			pt.Scale = rlwe.NewScale(payload.PayloadScale)
			return pt, ecd.Encode(src.columns[i-l], pt)
		}
		d := src.diags[i]
		if strat.PreRotatedByEnroller() {
			d = packing.Rotate(d, strat.PreRotation(i))
		}
		pt := ckks.NewPlaintext(set.CKKS, set.CKKS.MaxLevel())
		return pt, ecd.Encode(d, pt)
	}
	pw := m.PayloadWidth
	records := l + 2*pw
	// rows returns the payloads of vectors [lo, hi).
	rows := func(lo, hi int) []int16 { return opt.Payloads[lo*pw : hi*pw] }
	sum := &EnrollSummary{Added: n, GroupSlots: slots}
	commit := func(gi int, g Group, filled bool, added int) error {
		var old string
		if filled {
			old = m.Groups[gi].File
			sum.Growth -= m.Groups[gi].Bytes
			m.Count -= m.Groups[gi].Count
			m.Groups[gi] = g
		} else {
			m.Groups = append(m.Groups, g)
		}
		m.Count += g.Count
		if err := envelope.WriteJSON(filepath.Join(dir, manifestFile), m); err != nil {
			return err
		}
		if filled {
			// The manifest names the new file: the old one is no longer
			// read (a crash before this leaves it to removeStrayFiles).
			os.Remove(filepath.Join(dir, old))
			sum.GroupsFilled++
		} else {
			sum.GroupsNew++
		}
		sum.GroupsWritten++
		sum.Bytes += g.Bytes
		sum.Growth += g.Bytes
		sum.Writes = append(sum.Writes, GroupWrite{Group: gi, Filled: filled, Added: added, Count: g.Count, Bytes: g.Bytes, Seeded: g.Seeded})
		return nil
	}

	lo := 0
	if last := len(m.Groups) - 1; !opt.NewGroups && last >= 0 && m.Groups[last].Count < slots {
		lo = min(slots-m.Groups[last].Count, n)
		g, err := fillGroup(dir, m, set, last, vecs[:lo], rows(0, lo), newGroup, plaintext)
		if err != nil {
			return nil, err
		}
		if err := commit(last, g, true, lo); err != nil {
			return nil, err
		}
	}
	for ; lo < n; lo += slots {
		hi := min(lo+slots, n)
		diags, err := packing.Diagonals(vecs[lo:hi], l, slots, m.ScoreScale)
		if err != nil {
			return nil, err
		}
		src := groupPlain{diags, nil}
		if pw > 0 {
			src.columns = payload.PayloadColumns(rows(lo, hi), pw, 0, slots)
		}
		genc, err := newGroup()
		if err != nil {
			return nil, err
		}
		cts := make([]*rlwe.Ciphertext, records)
		if err := parallel.For(records, func(i int) error {
			pt, err := plaintext(src, i)
			if err != nil {
				return err
			}
			cts[i], err = genc.encrypt(pt, i)
			return err
		}); err != nil {
			return nil, fmt.Errorf("encrypting group: %w", err)
		}
		g := Group{File: groupFile(len(m.Groups), 0), Start: m.Count, Count: hi - lo, Seeded: genc.seed() != nil}
		if g.Bytes, err = writeGroup(filepath.Join(dir, g.File), m, g, set.CKKS, cts, genc.seed()); err != nil {
			return nil, err
		}
		if err := commit(len(m.Groups), g, false, hi-lo); err != nil {
			return nil, err
		}
	}
	sum.Total = m.Count
	sum.Seconds = time.Since(start).Seconds()
	return sum, nil
}

// fillGroup writes group g filled with vecs (at most its free slots) to its
// next file name and returns its new manifest entry; the manifest is not
// touched. The new vectors take slots [g.Count, g.Count+len(vecs)): their
// diagonals are those of a group whose first g.Count vectors are zero, so
// that adding their encryption to the stored diagonals (or re-encrypting the
// sum under a fresh seed) gives the diagonals of the whole group. The old
// file is read in one streamed pass, each record checked (StreamGroup).
func fillGroup(dir string, m *Manifest, set *params.Set, gi int, vecs [][]float64, payloads []int16,
	newGroup func() (groupEncryptor, error), plaintext func(groupPlain, int) (*rlwe.Plaintext, error)) (Group, error) {
	l, slots := set.L(), set.Slots()
	g := m.Groups[gi]
	if g.Count+len(vecs) > slots {
		return g, fmt.Errorf("internal error: %d vectors do not fit the %d free slots of %s", len(vecs), slots-g.Count, g.File)
	}
	rows := make([][]float64, g.Count, g.Count+len(vecs))
	zero := make([]float64, l)
	for i := range rows {
		rows[i] = zero
	}
	diags, err := packing.Diagonals(append(rows, vecs...), l, slots, m.ScoreScale)
	if err != nil {
		return g, err
	}
	src := groupPlain{diags, nil}
	if m.PayloadWidth > 0 {
		src.columns = payload.PayloadColumns(payloads, m.PayloadWidth, g.Count, slots)
	}
	genc, err := newGroup()
	if err != nil {
		return g, err
	}
	cts := make([]*rlwe.Ciphertext, l+2*m.PayloadWidth)
	err = StreamGroup(dir, m, set, g, max(1, min(l, 2*parallel.Workers())), func(first int, chunk []*rlwe.Ciphertext) error {
		return parallel.For(len(chunk), func(k int) error {
			i := first + k
			pt, err := plaintext(src, i)
			if err != nil {
				return err
			}
			cts[i], err = genc.fill(chunk[k], pt, i)
			return err
		})
	})
	if err != nil {
		return g, fmt.Errorf("filling group %s: %w", g.File, err)
	}
	out := Group{Start: g.Start, Count: g.Count + len(vecs), Seeded: genc.seed() != nil, Fills: g.Fills + 1}
	out.File = groupFile(gi, out.Fills)
	if out.Bytes, err = writeGroup(filepath.Join(dir, out.File), m, out, set.CKKS, cts, genc.seed()); err != nil {
		return g, err
	}
	return out, nil
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
	err := envelope.WriteFileStream(path, m.groupHeader(g), groupPayload(p, len(cts)-2*m.PayloadWidth, 2*m.PayloadWidth, seed != nil), 0o644, func(w io.Writer) error {
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

// groupPayload is the payload size of a group of l diagonals at the top
// level and cols payload columns at PayloadLevel.
func groupPayload(p ckks.Parameters, l, cols int, seededGroup bool) int64 {
	deg := storedDegree(seededGroup)
	n := int64(l)*int64(recordOverhead+codec.PackedSize(p, deg, p.MaxLevel())) +
		int64(cols)*int64(recordOverhead+codec.PackedSize(p, deg, PayloadLevel))
	if seededGroup {
		n += recordOverhead + seeded.SeedSize
	}
	return n
}

// PayloadLevel is the level of the payload columns: the level of the
// comparator's output on a chain with the payload level (params.NewWith).
const PayloadLevel = 1

// groupPlain is what a group's records encode: its diagonals and its
// payload columns (none without payloads).
type groupPlain struct {
	diags, columns [][]float64
}

// BytesPerGroup is the size of a group file's payload at the parameters of
// set for payloadWidth int16 per record: stored whole (public-key
// enrollment) or seeded (secret-key).
func BytesPerGroup(set *params.Set, payloadWidth int, seededGroup bool) int64 {
	return groupPayload(set.CKKS, set.L(), 2*payloadWidth, seededGroup)
}

// LoadGroup reads group g after verifying the whole file's SHA-256.
func LoadGroup(dir string, m *Manifest, set *params.Set, g Group) ([]*rlwe.Ciphertext, error) {
	path := filepath.Join(dir, g.File)
	var cts []*rlwe.Ciphertext
	err := envelope.ReadFileStream(path, m.groupHeader(g), func(r io.Reader, n int64) error {
		return readRecords(r, n, set, g, 2*m.PayloadWidth, set.L(), func(first int, chunk []*rlwe.Ciphertext) error {
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
	if err := readRecords(ps, ps.Len, set, g, 2*m.PayloadWidth, chunk, emit); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func groupError(path string, err error) error {
	if os.IsNotExist(err) {
		dir, name := filepath.Split(path)
		if m, lerr := Load(dir); lerr == nil {
			for _, g := range m.Groups {
				if g.File != name && strings.HasPrefix(name, strings.SplitN(g.File, ".", 2)[0]+".") {
					return fmt.Errorf("%w: group file %s was replaced by %s since the index was loaded (an enrollment filled the group): reopen the index", errs.ErrMismatch, path, g.File)
				}
			}
		}
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

// readRecords decodes the l diagonal records of a group payload, in chunks
// of chunk diagonals, then its cols payload columns, in one chunk of their
// own (first = l), regenerating the uniform halves of a seeded group.
func readRecords(r io.Reader, n int64, set *params.Set, g Group, cols, chunk int, emit func(int, []*rlwe.Ciphertext) error) error {
	p, l := set.CKKS, set.L()
	if want := groupPayload(p, l, cols, g.Seeded); n != want {
		return fmt.Errorf("%w: %d payload bytes, expected %d for %d diagonals and %d payload columns", errs.ErrCorrupt, n, want, l, cols)
	}
	buf := make([]byte, recordOverhead+max(codec.PackedSize(p, storedDegree(g.Seeded), p.MaxLevel()), seeded.SeedSize))
	var seed seeded.Seed
	if g.Seeded {
		b, err := readRecord(r, buf, seeded.SeedSize, "the seed")
		if err != nil {
			return err
		}
		copy(seed[:], b)
	}
	var batch []*rlwe.Ciphertext
	first := 0
	for i := 0; i < l+cols; i++ {
		what := fmt.Sprintf("%s diagonal %d", g.File, i)
		level := p.MaxLevel()
		if i >= l {
			what = fmt.Sprintf("%s payload column %d", g.File, i-l)
			level = PayloadLevel
		}
		rq := p.RingQ().AtLevel(level)
		size := codec.PackedSize(p, storedDegree(g.Seeded), level)
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
		if i >= l && !ct.Scale.Equal(rlwe.NewScale(payload.PayloadScale)) {
			return fmt.Errorf("%w: %s is not at the payload columns' scale", errs.ErrCorrupt, what)
		}
		batch = append(batch, ct)
		if (i < l && len(batch) == chunk) || i == l-1 || i == l+cols-1 {
			if err := emit(first, batch); err != nil {
				return err
			}
			first, batch = i+1, nil
		}
	}
	return nil
}
