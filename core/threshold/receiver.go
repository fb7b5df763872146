package threshold

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"encmatch/core/base/errs"
	"encmatch/core/base/params"
	"encmatch/core/base/polymsg"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/multiparty"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

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
		if err := polymsg.WriteFile(filepath.Join(tmp, receiverSecretFile), cfg.header(KindReceiverSecret), shareHead{Config: cfg},
			polymsg.QP(p, &sk.Value), privateFileMode); err != nil {
			return err
		}
		return polymsg.WriteFile(filepath.Join(tmp, receiverPublicFile), cfg.header(KindReceiverPublic), shareHead{Config: cfg},
			polymsg.QP(p, &pk.Value[0], &pk.Value[1]), publicFileMode)
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
	if err := polymsg.Read(polys, polymsg.QP(p, &pk.Value[0], &pk.Value[1]), KindReceiverPublic); err != nil {
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
	if err := polymsg.Read(polys, polymsg.QP(p, &sk.Value), KindReceiverSecret); err != nil {
		return nil, err
	}
	return &Receiver{ReceiverPublic: *pub, Set: set, Secret: sk}, nil
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
	polys, err := polymsg.Open(data, r.Config.header(KindDecryptionShare), head)
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
	var refs []polymsg.Ref
	for k, level := range levels {
		out[k] = pcks.AllocateShare(level)
		refs = append(refs, polymsg.Q(p, &out[k].Value[0], &out[k].Value[1])...)
	}
	if err := polymsg.Read(polys, refs, KindDecryptionShare); err != nil {
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
