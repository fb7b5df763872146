// Package irissetup runs the dealer-free setup of a threshold iris key set
// in files, so that the parties may run on different machines (issue 34;
// docs/IRIS.md, "Threshold iris: the setup in files"). No one ever holds
// a secret of the key set: every key comes out of Lattigo's multiparty
// protocols (package collective) on the parties' shares.
//
//  1. NewConfig (anyone): setup.json, the public description every party
//     holds: an iris preset made for n parties (irisparams.Preset.Parties),
//     the decryption threshold t, the database blocks to make keys for,
//     the key set's id and the seed of the common reference string.
//  2. Round1 (each party i): draws its shares (a dense share of the
//     bootstrapping ring's secret, a sparse share of the ephemeral secret,
//     shares of the query secrets and of every block's database secret);
//     publishes its shares of the query and database public keys, of the
//     encapsulation keys, of every block's key into the bootstrapping ring,
//     of the relinearisation key's first round and of every Galois key;
//     writes its Shamir shares of its dense share, one per party (to be
//     delivered privately), and keeps the dense share, the relinearisation
//     ephemeral and its query-secret shares. Its sparse and database shares
//     are used here and never written.
//  3. Round2 (each party i, with every round-one message and the Shamir
//     shares addressed to it): publishes its second relinearisation share
//     and keeps party-i.key: its Shamir share of the dense secret (t of them
//     decrypt) and its query-secret shares (its EncS contributions to every
//     enrollment need them).
//  4. Finalize (anyone): aggregates the public shares into the key set's
//     role directories in package iriskeys' layout: server/ (relinearisation,
//     Galois and encapsulation keys), querier/ (query public key) and
//     enroller/ (the database blocks' public key and their keys into the
//     bootstrapping ring).
//
// Every message is a polymsg frame bound to the key set (its id and its
// parameters' fingerprint), read into shares of the shape the parameters
// dictate, every coefficient checked; the party a message claims to come
// from must be the one its file is named for.
package irissetup

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"encmatch/core/base/envelope"
	"encmatch/core/base/errs"
	"encmatch/core/iris/iriskeys"
	"encmatch/core/iris/irisparams"
)

// Files and envelope kinds of the setup.
const (
	ConfigFile      = "setup.json"
	formatConfig    = "encmatch-iris-setup/1"
	kindRound1State = "iris-setup-round1-state"
	kindRound1      = "iris-setup-round1"
	kindGalois      = "iris-setup-galois-share"
	kindShamir      = "iris-setup-shamir-share"
	kindRound2      = "iris-setup-round2"
	kindParty       = "iris-setup-party"
	privateFileMode = 0o600
	publicFileMode  = 0o644
	crsBytes        = 32
)

// Round1StateFile is the name of party id's private round-one state.
func Round1StateFile(id int) string { return fmt.Sprintf("round1-state-%d.key", id) }

// Round1File is the name of party id's round-one message.
func Round1File(id int) string { return fmt.Sprintf("round1-%d.msg", id) }

// GaloisFile is the name of party id's share of the Galois key of element g.
func GaloisFile(id int, g uint64) string { return fmt.Sprintf("galois-%d-%d.msg", id, g) }

// ShamirFile is the name of the Shamir share that party from deals to party to.
func ShamirFile(from, to int) string { return fmt.Sprintf("shamir-%d-to-%d.share", from, to) }

// Round2File is the name of party id's round-two message.
func Round2File(id int) string { return fmt.Sprintf("round2-%d.msg", id) }

// PartyFile is the name of party id's secrets after the setup.
func PartyFile(id int) string { return fmt.Sprintf("party-%d.key", id) }

// Config is setup.json: the public description of a setup, the same at
// every party.
type Config struct {
	Format    string `json:"format"`
	KeyID     string `json:"key_id"`
	Preset    string `json:"preset"`
	Kappa     int    `json:"kappa"`
	Parties   int    `json:"parties"`
	Threshold int    `json:"threshold"`
	Blocks    int    `json:"blocks"`
	CRS       string `json:"crs"`
}

// NewConfig describes a setup at an iris preset made for several parties
// (their number is the preset's), comparator depth kappa (0: the
// preset's), decryption threshold t and blocks database blocks, with a
// fresh key id and common reference seed.
func NewConfig(preset string, kappa, t, blocks int) (*Config, error) {
	p, err := irisparams.Build(preset, kappa)
	if err != nil {
		return nil, err
	}
	c := &Config{Format: formatConfig, Preset: preset, Kappa: p.Kappa, Parties: p.Preset.Parties, Threshold: t, Blocks: blocks}
	id, crs := make([]byte, 16), make([]byte, crsBytes)
	if _, err := rand.Read(id); err != nil {
		return nil, err
	}
	if _, err := rand.Read(crs); err != nil {
		return nil, err
	}
	c.KeyID, c.CRS = hex.EncodeToString(id), hex.EncodeToString(crs)
	if _, err := c.check(p); err != nil {
		return nil, err
	}
	return c, nil
}

// Check validates a Config (as read from a file) and returns its
// parameters and the common reference seed.
func (c *Config) Check() (*irisparams.Params, []byte, error) {
	if c.Format != formatConfig {
		return nil, nil, fmt.Errorf("%w: iris setup format %q, expected %q", errs.ErrCorrupt, c.Format, formatConfig)
	}
	p, err := irisparams.Build(c.Preset, c.Kappa)
	if err != nil {
		return nil, nil, err
	}
	seed, err := c.check(p)
	return p, seed, err
}

func (c *Config) check(p *irisparams.Params) ([]byte, error) {
	n := p.Preset.Parties
	switch {
	case n == 0:
		return nil, fmt.Errorf("%w: preset %s is for one key holder (iris keygen), not a threshold setup", errs.ErrInvalid, c.Preset)
	case c.Parties != n:
		return nil, fmt.Errorf("%w: a setup of %d parties at preset %s, made for %d", errs.ErrInvalid, c.Parties, c.Preset, n)
	case c.Threshold < 1 || c.Threshold > n:
		return nil, fmt.Errorf("%w: decryption threshold t=%d outside [1, n=%d]", errs.ErrInvalid, c.Threshold, n)
	case c.Blocks < 1 || c.Blocks > iriskeys.MaxBlocks:
		return nil, fmt.Errorf("%w: %d database blocks outside [1, %d]", errs.ErrInvalid, c.Blocks, iriskeys.MaxBlocks)
	}
	if id, err := hex.DecodeString(c.KeyID); err != nil || len(id) != 16 {
		return nil, fmt.Errorf("%w: iris setup: the key id must be 16 hex-encoded bytes", errs.ErrCorrupt)
	}
	seed, err := hex.DecodeString(c.CRS)
	if err != nil || len(seed) != crsBytes {
		return nil, fmt.Errorf("%w: iris setup: the common reference seed must be %d hex-encoded bytes", errs.ErrCorrupt, crsBytes)
	}
	return seed, nil
}

// CheckParty refuses a party number outside 1..n.
func (c *Config) CheckParty(id int) error {
	if id < 1 || id > c.Parties {
		return fmt.Errorf("%w: party %d of a setup of %d parties", errs.ErrInvalid, id, c.Parties)
	}
	return nil
}

// header is the envelope header of a setup file of kind kind.
func (c *Config) header(p *irisparams.Params, kind string) envelope.Header {
	return envelope.Header{Kind: kind, Fingerprint: p.Fingerprint(), KeyID: c.KeyID}
}

// parties lists 1..n.
func (c *Config) parties() []int {
	out := make([]int, c.Parties)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

// WriteConfig writes c to path as JSON, atomically.
func WriteConfig(path string, c *Config) error { return envelope.WriteJSON(path, c) }

// ReadConfig reads and checks setup.json.
func ReadConfig(path string) (*Config, error) {
	var c Config
	if err := envelope.ReadJSON(path, "iris setup", &c); err != nil {
		return nil, err
	}
	if _, _, err := c.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &c, nil
}

// meta is the key set's iris.json (before its role is set).
func (c *Config) meta(p *irisparams.Params) iriskeys.Meta {
	return iriskeys.Meta{Format: iriskeys.Format, KeyID: c.KeyID, Preset: c.Preset, Insecure: p.Preset.Insecure, Kappa: p.Kappa, Inner: p.CCMM.Lit.Inner}
}

// ensureDir creates dir (private to its owner).
func ensureDir(dir string) error { return os.MkdirAll(filepath.Clean(dir), 0o700) }
