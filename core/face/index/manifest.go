// The manifest: what an index is (parameters, key set, threshold, rule,
// groups), its checks, and reading it.

package index

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"

	"encmatch/core/base/comparator"
	"encmatch/core/base/envelope"
	"encmatch/core/base/errs"
	"encmatch/core/base/params"
	"encmatch/core/face/keys"
	"encmatch/core/face/payload"
	"encmatch/core/face/strategy"
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
	return strategy.New(m.Strategy, m.N1, params.BlockSize(m.Params.Dim, m.Params.Fold))
}

// ParamSet rebuilds the parameter set of the manifest.
func (m *Manifest) ParamSet() (*params.Set, error) {
	set, err := keys.ParamSetMatching(m.Params.Preset, m.Params.Kappa, m.Params.Dim, m.Params.Payload, m.Params.Fold, m.Fingerprint)
	if keys.IsFingerprintMismatch(err) {
		return nil, fmt.Errorf("%w: manifest fingerprint does not match its parameters", errs.ErrCorrupt)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: manifest parameters: %v", errs.ErrCorrupt, err)
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
