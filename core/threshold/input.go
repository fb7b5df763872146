package threshold

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"

	"encmatch/core/base/codec"
	"encmatch/core/base/envelope"
	"encmatch/core/base/errs"
	"encmatch/core/base/params"
	"encmatch/core/face/keys"
	"encmatch/core/face/result"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// Input is what threshold decryption decrypts: the ciphertexts of a
// search result bound to its search (kind "threshold-search", the only
// kind a decryptor shares: search.go), of an encmatch result (kind
// "result") or of a threshold ciphertext (kind "threshold-ciphertext"),
// and the SHA-256 of its bytes, which binds decryption shares to it.
type Input struct {
	Kind        string
	Ciphertexts []*rlwe.Ciphertext
	Digest      string
	// Result is the decoded search result when Kind is "result" or
	// "threshold-search" (its header says how to read the decrypted slots:
	// result.Result.Read).
	Result *result.Result
	// Search is the transcript of a "threshold-search" input, else nil.
	Search *SearchHead
	// QueryDigest is the level-0 digest of a "threshold-search" input's
	// query ciphertext, and Digests those of the ciphertexts (the
	// ciphertext identities a decryptor's journal records).
	QueryDigest string
	Digests     []string
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
		in.Ciphertexts, in.Result = r.Ciphertexts, r
	case KindSearch:
		b, err := decodeSearch(data, cfg.header(""), set)
		if err != nil {
			return nil, err
		}
		in.Ciphertexts, in.Result, in.Search = b.result.Ciphertexts, b.result, b.head
		in.QueryDigest = levelZeroDigest(b.query)
	case KindCiphertext:
		if in.Ciphertexts, err = decodeCiphertexts(payload, set.CKKS); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("%w: expected a %s, a %s or a %s, got a %s", errs.ErrMismatch, KindSearch, result.KindResult, KindCiphertext, h.Kind)
	}
	if len(in.Ciphertexts) == 0 {
		return nil, fmt.Errorf("%w: %s holds no ciphertext", errs.ErrCorrupt, h.Kind)
	}
	for _, ct := range in.Ciphertexts {
		in.Digests = append(in.Digests, levelZeroDigest(ct))
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
