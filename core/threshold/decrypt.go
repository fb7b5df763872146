package threshold

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"

	"encmatch/core/codec"
	"encmatch/core/envelope"
	"encmatch/core/errs"
	"encmatch/core/keys"
	"encmatch/core/params"
	"encmatch/core/result"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/multiparty"
	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// shareHead is the JSON header of a threshold secret share and of the
// receiver's keys: the setup they belong to.
type shareHead struct {
	Config *Config `json:"config"`
	Party  int     `json:"party,omitempty"`
}

// openWithConfig opens a message that carries its setup's Config in its
// header, checks the Config and that the envelope belongs to it.
func openWithConfig(data []byte, kind string) (*shareHead, *params.Set, []byte, error) {
	h, _, err := envelope.Open(data)
	if err != nil {
		return nil, nil, nil, err
	}
	head := new(shareHead)
	polys, err := openHead(data, envelope.Header{Kind: kind}, head)
	if err != nil {
		return nil, nil, nil, err
	}
	if head.Config == nil {
		return nil, nil, nil, fmt.Errorf("%w: %s without its threshold setup", errs.ErrCorrupt, kind)
	}
	set, err := head.Config.Check()
	if err != nil {
		return nil, nil, nil, err
	}
	if err := h.Expect(head.Config.header(kind)); err != nil {
		return nil, nil, nil, err
	}
	return head, set, polys, nil
}

// Share is decryptor Party's threshold secret share: its Shamir share of
// the collective secret key.
type Share struct {
	Config *Config
	Set    *params.Set
	Party  int
	Value  multiparty.ShamirSecretShare
}

// DecodeShare decodes a threshold secret share file's bytes.
func DecodeShare(data []byte) (*Share, error) {
	head, set, polys, err := openWithConfig(data, KindShare)
	if err != nil {
		return nil, err
	}
	if err := head.Config.CheckParty(head.Party); err != nil {
		return nil, fmt.Errorf("%w: %v", errs.ErrCorrupt, err)
	}
	p := *set.CKKS.GetRLWEParameters()
	s := &Share{Config: head.Config, Set: set, Party: head.Party, Value: multiparty.NewThresholdizer(p).AllocateThresholdSecretShare()}
	if err := readPolys(polys, qpRefs(p, &s.Value.Poly), KindShare); err != nil {
		return nil, err
	}
	return s, nil
}

// LoadShare reads a threshold secret share file.
func LoadShare(path string) (*Share, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := DecodeShare(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// ReceiverPublic is the receiver's public key, to which decryption shares
// switch the ciphertext, and its digest, which binds shares to it.
type ReceiverPublic struct {
	Config *Config
	Key    *rlwe.PublicKey
	Digest string
}

// Receiver holds the receiver's key pair; it alone can combine decryption
// shares into plaintext.
type Receiver struct {
	ReceiverPublic
	Set    *params.Set
	Secret *rlwe.SecretKey
}

// GenerateReceiver writes a receiver key pair for a setup to dir (which must
// not exist or be empty): receiver.key (secret, mode 0600) and receiver.pub
// (given to the decryptors).
func GenerateReceiver(cfg *Config, set *params.Set, dir string) error {
	p := *set.CKKS.GetRLWEParameters()
	sk, pk := rlwe.NewKeyGenerator(p).GenKeyPairNew()
	return writeDirAtomic(dir, func(tmp string) error {
		if err := writeMessage(filepath.Join(tmp, receiverSecretFile), cfg.header(KindReceiverSecret), shareHead{Config: cfg},
			qpRefs(p, &sk.Value), privateFileMode); err != nil {
			return err
		}
		return writeMessage(filepath.Join(tmp, receiverPublicFile), cfg.header(KindReceiverPublic), shareHead{Config: cfg},
			qpRefs(p, &pk.Value[0], &pk.Value[1]), publicFileMode)
	})
}

// DecodeReceiverPublic decodes a receiver's public key file's bytes.
func DecodeReceiverPublic(data []byte) (*ReceiverPublic, error) {
	head, set, polys, err := openWithConfig(data, KindReceiverPublic)
	if err != nil {
		return nil, err
	}
	p := *set.CKKS.GetRLWEParameters()
	pk := rlwe.NewPublicKey(p)
	if err := readPolys(polys, qpRefs(p, &pk.Value[0], &pk.Value[1]), KindReceiverPublic); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(polys)
	return &ReceiverPublic{Config: head.Config, Key: pk, Digest: hex.EncodeToString(sum[:])}, nil
}

// LoadReceiverPublic reads a receiver's public key file.
func LoadReceiverPublic(path string) (*ReceiverPublic, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r, err := DecodeReceiverPublic(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// LoadReceiver reads a receiver directory written by GenerateReceiver.
func LoadReceiver(dir string) (*Receiver, error) {
	pub, err := LoadReceiverPublic(ReceiverPublicFile(dir))
	if err != nil {
		return nil, err
	}
	path := ReceiverSecretFile(dir)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r, err := decodeReceiverSecret(data, pub)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// decodeReceiverSecret decodes a receiver's secret key file's bytes and
// pairs it with its public key.
func decodeReceiverSecret(data []byte, pub *ReceiverPublic) (*Receiver, error) {
	head, set, polys, err := openWithConfig(data, KindReceiverSecret)
	if err != nil {
		return nil, err
	}
	if head.Config.KeyID != pub.Config.KeyID {
		return nil, fmt.Errorf("%w: the receiver's secret and public keys belong to different key sets", errs.ErrMismatch)
	}
	p := *set.CKKS.GetRLWEParameters()
	sk := rlwe.NewSecretKey(p)
	if err := readPolys(polys, qpRefs(p, &sk.Value), KindReceiverSecret); err != nil {
		return nil, err
	}
	return &Receiver{ReceiverPublic: *pub, Set: set, Secret: sk}, nil
}

// Input is what threshold decryption decrypts: the ciphertexts of an
// encmatch result (kind "result") or of a threshold ciphertext (kind
// "threshold-ciphertext"), and the SHA-256 of its bytes, which binds
// decryption shares to it.
type Input struct {
	Kind        string
	Ciphertexts []*rlwe.Ciphertext
	Digest      string
}

// DecodeInput decodes the bytes of a ciphertext input made under a setup's
// key set, checking every ciphertext's shape before decoding it.
func DecodeInput(data []byte, cfg *Config, set *params.Set) (*Input, error) {
	h, payload, err := envelope.Open(data)
	if err != nil {
		return nil, err
	}
	if err := h.Expect(cfg.header("")); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	in := &Input{Kind: h.Kind, Digest: hex.EncodeToString(sum[:])}
	switch h.Kind {
	case result.KindResult:
		r, err := result.Unmarshal(data, cfg.header(""), set.CKKS)
		if err != nil {
			return nil, err
		}
		in.Ciphertexts = r.Ciphertexts
	case KindCiphertext:
		if in.Ciphertexts, err = decodeCiphertexts(payload, set.CKKS); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("%w: expected a %s or a %s, got a %s", errs.ErrMismatch, result.KindResult, KindCiphertext, h.Kind)
	}
	if len(in.Ciphertexts) == 0 {
		return nil, fmt.Errorf("%w: %s holds no ciphertext", errs.ErrCorrupt, h.Kind)
	}
	return in, nil
}

// decodeCiphertexts decodes the length-prefixed ciphertexts of a
// threshold ciphertext payload.
func decodeCiphertexts(payload []byte, p ckks.Parameters) ([]*rlwe.Ciphertext, error) {
	var out []*rlwe.Ciphertext
	for len(payload) > 0 {
		chunk, rest, err := envelope.NextChunk(payload)
		if err != nil {
			return nil, err
		}
		level, err := ciphertextLevel(len(chunk), p)
		if err != nil {
			return nil, err
		}
		ct, err := codec.DecodeCiphertext(chunk, p, 1, level, fmt.Sprintf("ciphertext %d", len(out)))
		if err != nil {
			return nil, err
		}
		out = append(out, ct)
		payload = rest
	}
	return out, nil
}

// ciphertextLevel infers the level of a degree-1 ciphertext from its size.
func ciphertextLevel(n int, p ckks.Parameters) (int, error) {
	base := ckks.NewCiphertext(p, 1, 0).BinarySize()
	per := 2 * (8 + 8*p.N()) // one more row (length field and N words) in each of the two polynomials
	if n < base || (n-base)%per != 0 || (n-base)/per > p.MaxLevel() {
		return 0, fmt.Errorf("%w: %d bytes is not the size of a ciphertext of these parameters", errs.ErrCorrupt, n)
	}
	return (n - base) / per, nil
}

// EncodeCiphertexts frames ciphertexts made under a key set as a
// threshold ciphertext.
func EncodeCiphertexts(meta *keys.Meta, cts []*rlwe.Ciphertext) ([]byte, error) {
	var payload []byte
	for _, ct := range cts {
		b, err := ct.MarshalBinary()
		if err != nil {
			return nil, err
		}
		payload = envelope.AppendChunk(payload, b)
	}
	return envelope.Seal(envelope.Header{Kind: KindCiphertext, Fingerprint: meta.Fingerprint, KeyID: meta.KeyID}, payload), nil
}

// Encrypt encrypts rows of real values (each at most one value per slot)
// under a (collective) public key, one ciphertext per row at the top
// level and default scale, framed as a threshold ciphertext.
func Encrypt(pub *keys.Public, rows [][]float64) ([]byte, error) {
	p := pub.Params.CKKS
	if len(rows) == 0 {
		return nil, fmt.Errorf("%w: nothing to encrypt", errs.ErrInvalid)
	}
	enc, encoder := rlwe.NewEncryptor(p, pub.Key), ckks.NewEncoder(p)
	cts := make([]*rlwe.Ciphertext, len(rows))
	for i, row := range rows {
		if len(row) == 0 || len(row) > p.MaxSlots() {
			return nil, fmt.Errorf("%w: row %d has %d values, expected 1 to %d", errs.ErrInvalid, i, len(row), p.MaxSlots())
		}
		for _, v := range row {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("%w: row %d holds NaN or infinite values", errs.ErrInvalid, i)
			}
		}
		pt := ckks.NewPlaintext(p, p.MaxLevel())
		if err := encoder.Encode(row, pt); err != nil {
			return nil, fmt.Errorf("%w: encoding row %d: %v", errs.ErrInvalid, i, err)
		}
		ct, err := enc.EncryptNew(pt)
		if err != nil {
			return nil, err
		}
		cts[i] = ct
	}
	return EncodeCiphertexts(pub.Meta, cts)
}

// decHead is the JSON header of a decryption share.
type decHead struct {
	Party      int      `json:"party"`
	Parties    []int    `json:"parties"`
	Ciphertext string   `json:"ciphertext"` // SHA-256 of the input's bytes
	Receiver   string   `json:"receiver"`   // digest of the receiver's public key
	Levels     []int    `json:"levels"`
	Flooding   Flooding `json:"flooding"`
}

// DecryptionInfo describes a decryption share.
type DecryptionInfo struct {
	Party    int      `json:"party"`
	Parties  []int    `json:"parties"`
	Flooding Flooding `json:"flooding"`
}

// checkParties validates the participant set of a decryption: exactly t
// distinct parties of 1..n, returned sorted.
func (c *Config) checkParties(parties []int) ([]int, error) {
	sorted := slices.Clone(parties)
	slices.Sort(sorted)
	if len(slices.Compact(slices.Clone(sorted))) != len(sorted) {
		return nil, fmt.Errorf("%w: participant list %v names a party twice", errs.ErrInvalid, parties)
	}
	if len(sorted) != c.Threshold {
		return nil, fmt.Errorf("%w: threshold decryption needs exactly t=%d participating parties, got %d (%v)", errs.ErrInvalid, c.Threshold, len(sorted), parties)
	}
	for _, id := range sorted {
		if err := c.CheckParty(id); err != nil {
			return nil, err
		}
	}
	return sorted, nil
}

// Decrypt makes decryptor s's decryption share of in for the participant
// set parties (exactly t party ids, s's own among them), switching every
// ciphertext to the receiver's public key with noise flooding planned by
// PlanFlooding from the smallest ciphertext scale.
func (s *Share) Decrypt(in *Input, parties []int, recv *ReceiverPublic, opt FloodOptions) ([]byte, *DecryptionInfo, error) {
	cfg := s.Config
	if recv.Config.KeyID != cfg.KeyID || recv.Config.Fingerprint != cfg.Fingerprint {
		return nil, nil, fmt.Errorf("%w: the receiver's public key belongs to another key set", errs.ErrMismatch)
	}
	sorted, err := cfg.checkParties(parties)
	if err != nil {
		return nil, nil, err
	}
	if !slices.Contains(sorted, s.Party) {
		return nil, nil, fmt.Errorf("%w: party %d is not among the participants %v", errs.ErrInvalid, s.Party, sorted)
	}
	p := *s.Set.CKKS.GetRLWEParameters()
	logScale := math.Inf(1)
	for _, ct := range in.Ciphertexts {
		logScale = math.Min(logScale, ct.Scale.Log2())
	}
	plan, err := PlanFlooding(p.LogN(), logScale, cfg.Threshold, opt)
	if err != nil {
		return nil, nil, err
	}
	sk, err := s.additiveShare(sorted)
	if err != nil {
		return nil, nil, err
	}
	sigma := math.Exp2(plan.Bits)
	pcks, err := multiparty.NewPublicKeySwitchProtocol(p, ring.DiscreteGaussian{Sigma: sigma, Bound: 6 * sigma})
	if err != nil {
		return nil, nil, err
	}
	head := decHead{Party: s.Party, Parties: sorted, Ciphertext: in.Digest, Receiver: recv.Digest, Flooding: plan}
	var refs []polyRef
	for _, ct := range in.Ciphertexts {
		sh := pcks.AllocateShare(ct.Level())
		pcks.GenShare(sk, recv.Key, ct, &sh)
		head.Levels = append(head.Levels, ct.Level())
		refs = append(refs, qRefs(p, &sh.Value[0], &sh.Value[1])...)
	}
	out, err := seal(cfg.header(KindDecryptionShare), head, refs)
	if err != nil {
		return nil, nil, err
	}
	return out, &DecryptionInfo{Party: s.Party, Parties: sorted, Flooding: plan}, nil
}

// additiveShare turns the Shamir share into a t-out-of-t additive share of
// the collective secret for the participants (multiparty.Combiner).
func (s *Share) additiveShare(parties []int) (*rlwe.SecretKey, error) {
	p := *s.Set.CKKS.GetRLWEParameters()
	own := multiparty.ShamirPublicPoint(s.Party)
	cmb := multiparty.NewCombiner(p, own, points(parties), s.Config.Threshold)
	sk := rlwe.NewSecretKey(p)
	if err := cmb.GenAdditiveShare(points(parties), own, s.Value, sk); err != nil {
		return nil, fmt.Errorf("%w: %v", errs.ErrInvalid, err)
	}
	return sk, nil
}

// CombineInfo describes a combination of decryption shares.
type CombineInfo struct {
	Parties  []int      `json:"parties"`
	Flooding []Flooding `json:"flooding"`
}

// Combine checks t decryption shares of in, one from each participant,
// all made for the same participants, this input and this receiver, and
// decrypts in: the decoded real slot values of every ciphertext.
func (r *Receiver) Combine(in *Input, shares [][]byte) ([][]float64, *CombineInfo, error) {
	p := *r.Set.CKKS.GetRLWEParameters()
	pcks, err := multiparty.NewPublicKeySwitchProtocol(p, p.Xe())
	if err != nil {
		return nil, nil, err
	}
	var levels []int
	for _, ct := range in.Ciphertexts {
		levels = append(levels, ct.Level())
	}
	sums := make([]multiparty.PublicKeySwitchShare, len(levels))
	info := &CombineInfo{}
	seen := map[int]bool{}
	for i, data := range shares {
		head, sh, err := r.decodeShare(data, in, levels)
		if err != nil {
			return nil, nil, fmt.Errorf("decryption share %d: %w", i+1, err)
		}
		if err := r.admit(head, info, seen); err != nil {
			return nil, nil, err
		}
		for k := range sums {
			if i == 0 {
				sums[k] = sh[k]
			} else if err := pcks.AggregateShares(sums[k], sh[k], &sums[k]); err != nil {
				return nil, nil, fmt.Errorf("%w: decryption share of party %d: %v", errs.ErrCorrupt, head.Party, err)
			}
		}
		info.Flooding = append(info.Flooding, head.Flooding)
	}
	if err := r.complete(info, seen); err != nil {
		return nil, nil, err
	}
	values, err := r.decryptAll(pcks, in, sums)
	if err != nil {
		return nil, nil, err
	}
	return values, info, nil
}

// admit checks that a share's participants agree with the previous shares'
// and that its party has not been seen yet.
func (r *Receiver) admit(head *decHead, info *CombineInfo, seen map[int]bool) error {
	sorted, err := r.Config.checkParties(head.Parties)
	if err != nil || !slices.Equal(sorted, head.Parties) || !slices.Contains(sorted, head.Party) {
		return fmt.Errorf("%w: decryption share of party %d names an invalid participant set %v", errs.ErrCorrupt, head.Party, head.Parties)
	}
	if info.Parties == nil {
		info.Parties = sorted
	} else if !slices.Equal(info.Parties, sorted) {
		return fmt.Errorf("%w: decryption shares were made for different participant sets: %v and %v", errs.ErrMismatch, info.Parties, sorted)
	}
	if seen[head.Party] {
		return fmt.Errorf("%w: two decryption shares from party %d", errs.ErrInvalid, head.Party)
	}
	seen[head.Party] = true
	return nil
}

// complete refuses fewer than t shares, naming the missing parties.
func (r *Receiver) complete(info *CombineInfo, seen map[int]bool) error {
	t := r.Config.Threshold
	if len(seen) >= t {
		return nil
	}
	if len(seen) == 0 {
		return fmt.Errorf("%w: no decryption share given, threshold decryption needs t=%d", errs.ErrInvalid, t)
	}
	var missing []int
	for _, id := range info.Parties {
		if !seen[id] {
			missing = append(missing, id)
		}
	}
	return fmt.Errorf("%w: %d decryption share(s) given, threshold decryption needs t=%d (missing parties %v): fewer than t shares reveal nothing",
		errs.ErrInvalid, len(seen), t, missing)
}

// decodeShare decodes a decryption share of in made for this receiver.
func (r *Receiver) decodeShare(data []byte, in *Input, levels []int) (*decHead, []multiparty.PublicKeySwitchShare, error) {
	p := *r.Set.CKKS.GetRLWEParameters()
	head := new(decHead)
	polys, err := openHead(data, r.Config.header(KindDecryptionShare), head)
	if err != nil {
		return nil, nil, err
	}
	if head.Ciphertext != in.Digest {
		return nil, nil, fmt.Errorf("%w: the share of party %d was made for another ciphertext", errs.ErrMismatch, head.Party)
	}
	if head.Receiver != r.Digest {
		return nil, nil, fmt.Errorf("%w: the share of party %d was made for another receiver's key", errs.ErrMismatch, head.Party)
	}
	if !slices.Equal(head.Levels, levels) {
		return nil, nil, fmt.Errorf("%w: the share of party %d has levels %v, the ciphertexts %v", errs.ErrCorrupt, head.Party, head.Levels, levels)
	}
	pcks, err := multiparty.NewPublicKeySwitchProtocol(p, p.Xe())
	if err != nil {
		return nil, nil, err
	}
	out := make([]multiparty.PublicKeySwitchShare, len(levels))
	var refs []polyRef
	for k, level := range levels {
		out[k] = pcks.AllocateShare(level)
		refs = append(refs, qRefs(p, &out[k].Value[0], &out[k].Value[1])...)
	}
	if err := readPolys(polys, refs, KindDecryptionShare); err != nil {
		return nil, nil, err
	}
	return head, out, nil
}

// decryptAll switches every ciphertext to the receiver's key with the
// aggregated shares and decodes it.
func (r *Receiver) decryptAll(pcks multiparty.PublicKeySwitchProtocol, in *Input, sums []multiparty.PublicKeySwitchShare) ([][]float64, error) {
	p := r.Set.CKKS
	dec, encoder := rlwe.NewDecryptor(p, r.Secret), ckks.NewEncoder(p)
	out := make([][]float64, len(in.Ciphertexts))
	for k, ct := range in.Ciphertexts {
		switched := ckks.NewCiphertext(p, 1, ct.Level())
		pcks.KeySwitch(ct, sums[k], switched)
		out[k] = make([]float64, p.MaxSlots())
		if err := encoder.Decode(dec.DecryptNew(switched), out[k]); err != nil {
			return nil, fmt.Errorf("%w: decoding ciphertext %d: %v", errs.ErrCorrupt, k, err)
		}
	}
	return out, nil
}
