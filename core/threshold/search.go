package threshold

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"encmatch/core/base/envelope"
	"encmatch/core/base/errs"
	"encmatch/core/base/params"
	"encmatch/core/base/polymsg"
	"encmatch/core/face/keys"
	"encmatch/core/face/result"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
)

// A decryptor makes a decryption share only for a search result bound to
// its search (docs/THRESHOLD.md, "What a decryptor decrypts"): a
// threshold-search message holds the query the search answered, the
// result the server returned and a transcript hash over both, the index
// id and generation, the mode and the key set. The decryptor checks that
// the query is a query (one ciphertext at the top level and the default
// scale), that the result is a complete result at level 0 (the
// comparator's output level) whose mode is the transcript's, that no
// result ciphertext is the query itself, and recomputes the transcript
// hash; its journal then refuses any ciphertext it has already shared
// (journal.go).
//
// The server signs the transcript (signing.go) and a decryptor shares
// only a search signed by the server key it trusts (Share.Decrypt): the
// checks above stop a probe handed over as is, the signature a probe that
// a querier rewrote with public operations (dropped to level 0,
// re-randomised) and framed as a result, since the querier cannot sign it.
// The server is trusted to sign only results it computed for the query.

// KindSearch is the envelope kind of a search result bound to its search.
const KindSearch = "threshold-search"

// transcriptDomain separates the transcript hash from every other hash.
const transcriptDomain = "encmatch/threshold/search/v1"

// maxIndexID bounds the index id named in a transcript.
const maxIndexID = 256

// SearchHead is the JSON header of a threshold-search message: what the
// transcript hash covers, the SHA-256 of the query and result bytes, and
// the transcript hash itself.
type SearchHead struct {
	Index      string `json:"index"`
	Generation int64  `json:"generation"`
	Mode       string `json:"mode"`
	Query      string `json:"query"`
	Result     string `json:"result"`
	Transcript string `json:"transcript"`
	// Signer is the server's public signing key (hex) and Signature its
	// Ed25519 signature over the transcript (signing.go).
	Signer    string `json:"signer"`
	Signature string `json:"signature"`
}

// transcript is the hash that binds a result to its search: SHA-256 over a
// domain string and, length-prefixed, the key id, the parameter
// fingerprint, the mode, the index id, the generation and the SHA-256 of
// the query and of the result bytes.
func transcript(h envelope.Header, s *SearchHead) string {
	var b []byte
	b = envelope.AppendChunk(b, []byte(transcriptDomain))
	for _, f := range []string{h.KeyID, h.Fingerprint, s.Mode, s.Index} {
		b = envelope.AppendChunk(b, []byte(f))
	}
	b = binary.LittleEndian.AppendUint64(b, uint64(s.Generation))
	b = envelope.AppendChunk(b, []byte(s.Query))
	b = envelope.AppendChunk(b, []byte(s.Result))
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// hexSHA256 is the hex SHA-256 of b.
func hexSHA256(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// BindSearch binds a search result to its search for the decryptors: it
// checks the query (kind "query") and the result (kind "result") against
// the key set of meta and set, and frames both with the transcript hash
// over them, the index id and its generation, signed with the server's
// key. Only the server that computed res from query may call it.
func BindSearch(key *SigningKey, meta *keys.Meta, set *params.Set, query, res []byte, index string, generation int64) ([]byte, *SearchHead, error) {
	h := envelope.Header{Fingerprint: meta.Fingerprint, KeyID: meta.KeyID}
	if index == "" || len(index) > maxIndexID {
		return nil, nil, fmt.Errorf("%w: the index id must be 1 to %d bytes", errs.ErrInvalid, maxIndexID)
	}
	if generation < 0 {
		return nil, nil, fmt.Errorf("%w: generation %d is negative", errs.ErrInvalid, generation)
	}
	r, err := result.Unmarshal(res, h, set.CKKS)
	if err != nil {
		return nil, nil, err
	}
	if key == nil {
		return nil, nil, fmt.Errorf("%w: binding a search needs the server's signing key", errs.ErrInvalid)
	}
	out, head, err := sealSearch(key, h, index, generation, string(r.Mode), query, res)
	if err != nil {
		return nil, nil, err
	}
	if _, err := decodeSearch(out, h, set); err != nil { // every check a decryptor makes
		return nil, nil, err
	}
	return out, head, nil
}

// sealSearch frames a query and a result with their signed transcript,
// unchecked.
func sealSearch(key *SigningKey, h envelope.Header, index string, generation int64, mode string, query, res []byte) ([]byte, *SearchHead, error) {
	head := &SearchHead{Index: index, Generation: generation, Mode: mode, Query: hexSHA256(query), Result: hexSHA256(res)}
	head.Transcript = transcript(h, head)
	key.sign(head)
	js, err := json.Marshal(head)
	if err != nil {
		return nil, nil, err
	}
	payload := envelope.AppendChunk(nil, js)
	payload = envelope.AppendChunk(payload, query)
	payload = envelope.AppendChunk(payload, res)
	h.Kind = KindSearch
	return envelope.Seal(h, payload), head, nil
}

// boundSearch is a decoded threshold-search message.
type boundSearch struct {
	head   *SearchHead
	query  *rlwe.Ciphertext
	result *result.Result
}

// decodeSearch decodes and checks a threshold-search message of the key
// set named by want (Fingerprint, KeyID).
func decodeSearch(data []byte, want envelope.Header, set *params.Set) (*boundSearch, error) {
	want.Kind = KindSearch
	head := new(SearchHead)
	rest, err := polymsg.OpenJSON(data, want, head)
	if err != nil {
		return nil, err
	}
	qb, rest, err := envelope.NextChunk(rest)
	if err != nil {
		return nil, err
	}
	rb, rest, err := envelope.NextChunk(rest)
	if err != nil {
		return nil, err
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%w: %s: %d trailing bytes", errs.ErrCorrupt, KindSearch, len(rest))
	}
	if head.Index == "" || len(head.Index) > maxIndexID || head.Generation < 0 {
		return nil, fmt.Errorf("%w: %s: index id of %d bytes, generation %d", errs.ErrCorrupt, KindSearch, len(head.Index), head.Generation)
	}
	if head.Query != hexSHA256(qb) || head.Result != hexSHA256(rb) {
		return nil, fmt.Errorf("%w: %s: the query or result bytes do not match the transcript's digests", errs.ErrCorrupt, KindSearch)
	}
	if head.Transcript != transcript(want, head) {
		return nil, fmt.Errorf("%w: %s: transcript hash does not match its contents", errs.ErrCorrupt, KindSearch)
	}
	if err := verifySignature(head); err != nil {
		return nil, err
	}
	q, err := result.UnmarshalQuery(qb, want, set.CKKS)
	if err != nil {
		return nil, fmt.Errorf("%s: the bound query is not a query of this key set: %w", KindSearch, err)
	}
	r, err := result.Unmarshal(rb, want, set.CKKS)
	if err != nil {
		return nil, fmt.Errorf("%s: the bound result is not a result of this key set at the result level: %w", KindSearch, err)
	}
	if string(r.Mode) != head.Mode {
		return nil, fmt.Errorf("%w: %s: a %s result bound as a %s search", errs.ErrCorrupt, KindSearch, r.Mode, head.Mode)
	}
	if err := r.CheckComplete(); err != nil {
		return nil, fmt.Errorf("%s: %w", KindSearch, err)
	}
	qd := levelZeroDigest(q)
	seen := map[string]bool{}
	for i, ct := range r.Ciphertexts {
		d := levelZeroDigest(ct)
		if d == qd {
			return nil, fmt.Errorf("%w: %s: result ciphertext %d is the query's own ciphertext: a decryptor does not decrypt a query", errs.ErrInvalid, KindSearch, i)
		}
		if seen[d] {
			return nil, fmt.Errorf("%w: %s: result ciphertext %d appears twice: a decryptor shares a ciphertext once", errs.ErrInvalid, KindSearch, i)
		}
		seen[d] = true
	}
	return &boundSearch{head: head, query: q, result: r}, nil
}

// levelZeroDigest is the hex SHA-256 of the level-0 rows of a degree-1
// ciphertext's two polynomials (c0 then c1, as written on the wire): a
// ciphertext and the same ciphertext dropped to level 0, or relabelled
// with another scale, have the same digest.
func levelZeroDigest(ct *rlwe.Ciphertext) string {
	h := sha256.New()
	var buf []byte
	for _, poly := range ct.Value[:2] {
		buf = buf[:0]
		for _, c := range poly.Coeffs[0] {
			buf = binary.LittleEndian.AppendUint64(buf, c)
		}
		h.Write(buf)
	}
	return hex.EncodeToString(h.Sum(nil))
}
