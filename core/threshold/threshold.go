// Package threshold implements dealer-free t-out-of-n threshold key
// generation and threshold decryption over encmatch's CKKS parameters, with
// Lattigo's multiparty protocols (docs/THRESHOLD.md).
//
// Roles: n decryptors (parties 1..n) run the setup; a computing server
// uses the resulting public and evaluation keys, which are written in the
// layout of core/face/keys' server directory; a receiver holds its own key pair
// and alone learns a decrypted value, from the decryption shares of any t
// decryptors.
//
// Setup, in files so that parties may run on different machines:
//
//  1. Init: anyone writes the Config (parameters, n, t, rotations, key id
//     and the seed of the common reference string) and gives it to every
//     party.
//  2. Round1 (each party i): samples its secret s_i; publishes its shares
//     of the collective public key (CKG), of the first round of the
//     relinearisation key (RKG) and of every Galois key (GKG); writes its
//     Shamir shares of s_i for every party j (to be delivered privately).
//  3. Round2 (each party i, with every round-1 message and the Shamir
//     shares addressed to it): publishes its second-round RKG share and
//     keeps its threshold secret share, a Shamir share of s = sum s_i.
//  4. Finalize (anyone): aggregates the public shares into the public,
//     relinearisation and Galois keys.
//
// Key generation uses every party's ordinary secret s_i (n-out-of-n) and
// Shamir sharing only serves decryption: all n parties must be present in
// round 1 anyway (each must deal its Shamir polynomial so that no one
// knows s), so generating the keys in the same round saves the extra round
// and the agreement on an active set that Lattigo's t-out-of-t key
// generation from combined shares would need, for the same collective key
// s = sum s_i.
//
// Decryption: decryptor i turns its Shamir share into a t-out-of-t
// additive share for the agreed set of t participants
// (multiparty.Combiner) and runs the public-key switch protocol
// (multiparty.PublicKeySwitchProtocol) to the receiver's public key with
// noise flooding; the receiver aggregates the t shares, switches the
// ciphertext to its own key and decrypts.
package threshold

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"slices"
	"sync"

	"encmatch/core/base/envelope"
	"encmatch/core/base/errs"
	"encmatch/core/base/params"
	"encmatch/core/face/keys"
	"encmatch/core/face/strategy"

	"github.com/tuneinsight/lattigo/v6/multiparty"
	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/utils/sampling"
)

// Envelope kinds of the threshold artefacts.
const (
	KindRound1State     = "threshold-round1-state"
	KindRound1          = "threshold-round1"
	KindGalois          = "threshold-galois-share"
	KindShamir          = "threshold-shamir-share"
	KindRound2          = "threshold-round2"
	KindShare           = "threshold-share"
	KindReceiverSecret  = "threshold-receiver-secret"
	KindReceiverPublic  = "threshold-receiver-public"
	KindCiphertext      = "threshold-ciphertext"
	KindDecryptionShare = "threshold-decryption-share"
	metaFormat          = 1 // keys.Meta format version
	crsBytes            = 32
	keyIDBytes          = 8
	serverMetaFile      = "keys.json"
	serverPublicFile    = "public.key"
	serverRelinFile     = "relin.key"
	thresholdFile       = "threshold.json"
	receiverSecretFile  = "receiver.key"
	receiverPublicFile  = "receiver.pub"
	shareFilePattern    = "threshold-share-%d.key"
	round1StatePattern  = "round1-state-%d.key"
	round1Pattern       = "round1-%d.msg"
	round2Pattern       = "round2-%d.msg"
	galoisPattern       = "galois-%d-%d.msg"
	shamirPattern       = "shamir-%d-to-%d.share"
	serverGaloisPattern = "gal-%d.key"
	privateFileMode     = 0o600
	publicFileMode      = 0o644
)

// MaxParties bounds n (papers/004 §5 sizes the flooding for t <= 2^8).
const MaxParties = 256

// Config is the public description of a threshold setup: the key set's
// metadata as core/face/keys writes it (parameters, key id, strategy,
// rotations, Galois elements), the number of parties n, the threshold t
// and the seed of the common reference string. Every party holds the same
// Config.
type Config struct {
	keys.Meta
	Parties   int    `json:"parties"`
	Threshold int    `json:"threshold"`
	CRS       string `json:"crs"`
}

// NewConfig describes a t-out-of-n setup for parameter set set. Rotation
// keys are made for the similarity strategy strat (nil: none), the
// membership inner sum and the extra rotations.
func NewConfig(set *params.Set, strat *strategy.Strategy, extra []int, n, t int) (*Config, error) {
	if n < 1 || n > MaxParties {
		return nil, fmt.Errorf("%w: number of parties n=%d outside [1, %d]", errs.ErrInvalid, n, MaxParties)
	}
	if t < 1 || t > n {
		return nil, fmt.Errorf("%w: threshold t=%d outside [1, n=%d]", errs.ErrInvalid, t, n)
	}
	if set.CKKS.RingType() != ring.Standard {
		// The flooding noise (flood.go) is measured on the standard ring only.
		return nil, fmt.Errorf("%w: preset %q: threshold key sets are built and measured on the standard ring only (use %q)", errs.ErrInvalid, set.Preset, params.Default)
	}
	id, crs := make([]byte, keyIDBytes), make([]byte, crsBytes)
	if _, err := rand.Read(id); err != nil {
		return nil, err
	}
	if _, err := rand.Read(crs); err != nil {
		return nil, err
	}
	rots := slices.Clone(extra)
	m := keys.Meta{Format: metaFormat, KeyID: hex.EncodeToString(id), Preset: set.Preset, Insecure: set.Insecure,
		Kappa: set.Kappa, Dim: set.Dim, Fold: set.Fold, Fingerprint: set.Fingerprint()}
	if strat != nil {
		if strat.L != set.L() {
			return nil, fmt.Errorf("%w: strategy made for block size %d, parameters have %d", errs.ErrInvalid, strat.L, set.L())
		}
		m.Strategy, m.N1 = strat.Name, strat.N1
		rots = append(strat.Rotations(), rots...)
	}
	slices.Sort(rots)
	m.Rotations = slices.Compact(rots)
	m.GaloisElements = keys.GaloisElements(set, m.Rotations)
	return &Config{Meta: m, Parties: n, Threshold: t, CRS: hex.EncodeToString(crs)}, nil
}

// Check validates a Config (as read from a file) and returns its
// parameter set.
func (c *Config) Check() (*params.Set, error) {
	set, err := metaParams(&c.Meta)
	if err != nil {
		return nil, err
	}
	if c.Parties < 1 || c.Parties > MaxParties || c.Threshold < 1 || c.Threshold > c.Parties {
		return nil, fmt.Errorf("%w: threshold setup with t=%d of n=%d parties", errs.ErrCorrupt, c.Threshold, c.Parties)
	}
	if seed, err := hex.DecodeString(c.CRS); err != nil || len(seed) != crsBytes {
		return nil, fmt.Errorf("%w: threshold setup: the common reference string must be %d hex-encoded bytes", errs.ErrCorrupt, crsBytes)
	}
	if !slices.Equal(keys.GaloisElements(set, c.Rotations), c.GaloisElements) {
		return nil, fmt.Errorf("%w: threshold setup: Galois elements do not match its rotations", errs.ErrCorrupt)
	}
	return set, nil
}

// paramCache keeps the parameter sets that Config.Check built, so that a
// process decoding many messages (a decryptor, a fuzzer) builds each once;
// it holds at most maxCachedParams sets.
var paramCache struct {
	sync.Mutex
	sets map[paramKey]*params.Set
}

// paramKey is what determines a key set's parameters.
type paramKey struct {
	format, kappa, dim  int
	fold                bool
	preset, fingerprint string
}

const maxCachedParams = 8

// metaParams is m.Params(), cached by the fields that determine it.
func metaParams(m *keys.Meta) (*params.Set, error) {
	k := paramKey{format: m.Format, kappa: m.Kappa, dim: m.Dim, fold: m.Fold, preset: m.Preset, fingerprint: m.Fingerprint}
	paramCache.Lock()
	set, ok := paramCache.sets[k]
	paramCache.Unlock()
	if ok {
		return set, nil
	}
	set, err := m.Params()
	if err != nil {
		return nil, err
	}
	paramCache.Lock()
	defer paramCache.Unlock()
	if paramCache.sets == nil || len(paramCache.sets) >= maxCachedParams {
		paramCache.sets = map[paramKey]*params.Set{}
	}
	paramCache.sets[k] = set
	return set, nil
}

// CheckParty validates a party id (1..n).
func (c *Config) CheckParty(id int) error {
	if id < 1 || id > c.Parties {
		return fmt.Errorf("%w: party %d outside [1, n=%d]", errs.ErrInvalid, id, c.Parties)
	}
	return nil
}

// header is the envelope header of an artefact of this setup.
func (c *Config) header(kind string) envelope.Header {
	return envelope.Header{Kind: kind, Fingerprint: c.Fingerprint, KeyID: c.KeyID}
}

// crs is the common reference string of one protocol instance: a keyed PRNG
// on the setup's seed and the instance's label, so that every party samples
// the same common polynomials whatever the order of its computations.
func (c *Config) crs(label string) multiparty.CRS {
	seed, _ := hex.DecodeString(c.CRS)
	prng, err := sampling.NewKeyedPRNG(append(seed, []byte("encmatch/threshold/"+label)...))
	if err != nil {
		panic(fmt.Errorf("keyed PRNG: %w", err)) // only fails if the system cannot hash
	}
	return prng
}

// points lists the Shamir public points of party ids.
func points(ids []int) []multiparty.ShamirPublicPoint {
	out := make([]multiparty.ShamirPublicPoint, len(ids))
	for i, id := range ids {
		out[i] = multiparty.ShamirPublicPoint(id)
	}
	return out
}

// allParties lists 1..n.
func (c *Config) allParties() []int {
	out := make([]int, c.Parties)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

// WriteConfig writes a Config as JSON, atomically.
func WriteConfig(path string, c *Config) error { return envelope.WriteJSON(path, c) }

// ReadConfig reads and checks a Config.
func ReadConfig(path string) (*Config, *params.Set, error) {
	c := new(Config)
	if err := envelope.ReadJSON(path, "threshold setup", c); err != nil {
		return nil, nil, err
	}
	set, err := c.Check()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, set, nil
}

// ShareFile is the name of party id's threshold secret share file.
func ShareFile(id int) string { return fmt.Sprintf(shareFilePattern, id) }

// ShamirFile is the name of the Shamir share that party from deals to party to.
func ShamirFile(from, to int) string { return fmt.Sprintf(shamirPattern, from, to) }

// ReceiverPublicFile is the path of the receiver's public key in dir.
func ReceiverPublicFile(dir string) string { return filepath.Join(dir, receiverPublicFile) }

// ReceiverSecretFile is the path of the receiver's secret key in dir.
func ReceiverSecretFile(dir string) string { return filepath.Join(dir, receiverSecretFile) }
