package threshold

import (
	"fmt"
	"math"
	"os"
	"slices"

	"encmatch/core/base/envelope"
	"encmatch/core/base/errs"
	"encmatch/core/base/params"
	"encmatch/core/base/polymsg"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/multiparty"
	"github.com/tuneinsight/lattigo/v6/ring"
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
	polys, err := polymsg.Open(data, envelope.Header{Kind: kind}, head)
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
// the collective secret key, and the path of its decryption journal
// (journal.go; LoadShare puts it beside the share file).
type Share struct {
	Config  *Config
	Set     *params.Set
	Party   int
	Value   multiparty.ShamirSecretShare
	Journal string
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
	if err := polymsg.Read(polys, polymsg.QP(p, &s.Value.Poly), KindShare); err != nil {
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
	s.Journal = defaultJournal(path, s.Party)
	return s, nil
}

// decHead is the JSON header of a decryption share.
type decHead struct {
	Party      int      `json:"party"`
	Parties    []int    `json:"parties"`
	Ciphertext string   `json:"ciphertext"` // SHA-256 of the input's bytes
	Receiver   string   `json:"receiver"`   // digest of the receiver's public key
	Levels     []int    `json:"levels"`
	Flooding   Flooding `json:"flooding"`
	Transcript string   `json:"transcript,omitempty"` // the bound search's transcript hash
}

// DecryptionInfo describes a decryption share.
type DecryptionInfo struct {
	Party      int      `json:"party"`
	Parties    []int    `json:"parties"`
	Flooding   Flooding `json:"flooding"`
	Transcript string   `json:"transcript"`
	Journal    string   `json:"journal"`
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
//
// in must be a search result bound to its search (kind "threshold-search",
// BindSearch) and signed by server, the server key this decryptor trusts:
// any other ciphertext, a probe among them, is refused. The
// share is recorded in s's journal, durably and before it is returned;
// a search that repeats a ciphertext (query or result) of a search shared
// before is refused with an fs.ErrExist error.
func (s *Share) Decrypt(in *Input, parties []int, recv *ReceiverPublic, server *SigningPublic, opt FloodOptions) ([]byte, *DecryptionInfo, error) {
	if in.Kind != KindSearch || in.Search == nil {
		return nil, nil, fmt.Errorf("%w: a decryptor shares only a search result bound to its search and signed by the server (a %s), not a %s: "+
			"any other ciphertext, an encrypted probe among them, could be decrypted for the receiver (docs/THRESHOLD.md)", errs.ErrInvalid, KindSearch, in.Kind)
	}
	if err := in.CheckSigner(server); err != nil {
		return nil, nil, err
	}
	sorted, err := s.checkRequest(parties, recv)
	if err != nil {
		return nil, nil, err
	}
	if _, err := PlanFlooding(s.Set.CKKS.LogN(), minLogScale(in), s.Config.Threshold, opt); err != nil {
		return nil, nil, err
	}
	unlock, err := s.lockJournal()
	if err != nil {
		return nil, nil, err
	}
	defer unlock()
	entries, err := s.ReadJournal()
	if err != nil {
		return nil, nil, err
	}
	if err := s.checkFresh(entries, in); err != nil {
		return nil, nil, err
	}
	out, info, err := s.makeShare(in, sorted, recv, opt)
	if err != nil {
		return nil, nil, err
	}
	if err := s.writeJournal(append(entries, newEntry(in, sorted, recv))); err != nil {
		return nil, nil, fmt.Errorf("recording the share in the journal %s (no share given): %w", s.Journal, err)
	}
	info.Journal = s.Journal
	return out, info, nil
}

// checkRequest checks the receiver's key set and the participants (exactly
// t distinct ids, s's own among them), returned sorted.
func (s *Share) checkRequest(parties []int, recv *ReceiverPublic) ([]int, error) {
	cfg := s.Config
	if recv.Config.KeyID != cfg.KeyID || recv.Config.Fingerprint != cfg.Fingerprint {
		return nil, fmt.Errorf("%w: the receiver's public key belongs to another key set", errs.ErrMismatch)
	}
	sorted, err := cfg.checkParties(parties)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(sorted, s.Party) {
		return nil, fmt.Errorf("%w: party %d is not among the participants %v", errs.ErrInvalid, s.Party, sorted)
	}
	return sorted, nil
}

// minLogScale is log2 of the smallest ciphertext scale of in.
func minLogScale(in *Input) float64 {
	logScale := math.Inf(1)
	for _, ct := range in.Ciphertexts {
		logScale = math.Min(logScale, ct.Scale.Log2())
	}
	return logScale
}

// makeShare computes the decryption share of in, with no check of its kind
// and no journal (Decrypt does both).
func (s *Share) makeShare(in *Input, sorted []int, recv *ReceiverPublic, opt FloodOptions) ([]byte, *DecryptionInfo, error) {
	cfg := s.Config
	p := *s.Set.CKKS.GetRLWEParameters()
	plan, err := PlanFlooding(p.LogN(), minLogScale(in), cfg.Threshold, opt)
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
	if in.Search != nil {
		head.Transcript = in.Search.Transcript
	}
	var refs []polymsg.Ref
	for _, ct := range in.Ciphertexts {
		sh := pcks.AllocateShare(ct.Level())
		pcks.GenShare(sk, recv.Key, ct, &sh)
		head.Levels = append(head.Levels, ct.Level())
		refs = append(refs, polymsg.Q(p, &sh.Value[0], &sh.Value[1])...)
	}
	out, err := polymsg.Seal(cfg.header(KindDecryptionShare), head, refs)
	if err != nil {
		return nil, nil, err
	}
	return out, &DecryptionInfo{Party: s.Party, Parties: sorted, Flooding: plan, Transcript: head.Transcript}, nil
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
