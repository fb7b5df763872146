// Creating an empty index.

package index

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"encmatch/core/base/comparator"
	"encmatch/core/base/envelope"
	"encmatch/core/base/errs"
	"encmatch/core/face/keys"
)

// CreateOptions are the choices fixed when an index is created.
type CreateOptions struct {
	// PayloadWidth int16 values enrolled beside each vector (0: none); it
	// needs a key set with the payload level.
	PayloadWidth int
	// Rule is RuleAtLeast or RuleAbove, or none (">=").
	Rule string
}

// Create makes an empty index bound to a server key set, with threshold
// delta (the only one its searches will ever use) and the choices of opt
// (CreateOptions{}: no payloads, rule ">=").
func Create(dir, serverKeyDir string, delta float64, opt CreateOptions) (*Manifest, error) {
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
