// Package result defines the wire format of queries and search results, the
// only ciphertexts that travel between client and server.
//
// A query is one framed ciphertext (kind "query"). A result (kind "result")
// is a JSON header followed by ciphertexts: one for membership (slot 0 holds
// the number of matches over the whole gallery), one per group for
// identification (slot t of group g is 1 when gallery entry
// groups[g].start + t matches, else 0). Neither ever holds a similarity
// score.
package result

import (
	"encoding/json"
	"fmt"

	"encmatch/core/codec"
	"encmatch/core/envelope"
	"encmatch/core/errs"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// Envelope kinds.
const (
	KindQuery  = "query"
	KindResult = "result"
)

// Search modes.
const (
	Membership     = "membership"
	Identification = "identification"
)

// CheckMode validates a mode name.
func CheckMode(mode string) error {
	if mode != Membership && mode != Identification {
		return fmt.Errorf("%w: unknown search mode %q (want %q or %q)", errs.ErrInvalid, mode, Membership, Identification)
	}
	return nil
}

// Span is the gallery range a group covers.
type Span struct {
	Start int `json:"start"`
	Count int `json:"count"`
}

// Header describes a result.
type Header struct {
	Mode  string  `json:"mode"`
	Delta float64 `json:"delta"`
	Total int     `json:"total"`
	Spans []Span  `json:"groups"`
}

// Result is a decoded result.
type Result struct {
	Header
	Ciphertexts []*rlwe.Ciphertext
}

// Marshal frames a result.
func Marshal(h envelope.Header, r *Result) ([]byte, error) {
	head, err := json.Marshal(r.Header)
	if err != nil {
		return nil, err
	}
	payload := envelope.AppendChunk(nil, head)
	for _, ct := range r.Ciphertexts {
		b, err := ct.MarshalBinary()
		if err != nil {
			return nil, err
		}
		payload = envelope.AppendChunk(payload, b)
	}
	h.Kind = KindResult
	return envelope.Seal(h, payload), nil
}

// Unmarshal opens a framed result made under parameters p with header want.
func Unmarshal(data []byte, want envelope.Header, p ckks.Parameters) (*Result, error) {
	want.Kind = KindResult
	payload, err := envelope.OpenExpect(data, want)
	if err != nil {
		return nil, fmt.Errorf("result: %w", err)
	}
	head, rest, err := envelope.NextChunk(payload)
	if err != nil {
		return nil, fmt.Errorf("result: %w", err)
	}
	r := new(Result)
	if err := json.Unmarshal(head, &r.Header); err != nil {
		return nil, fmt.Errorf("%w: result header: %v", errs.ErrCorrupt, err)
	}
	if err := CheckMode(r.Mode); err != nil {
		return nil, fmt.Errorf("%w: result: %v", errs.ErrCorrupt, err)
	}
	for len(rest) > 0 {
		var chunk []byte
		if chunk, rest, err = envelope.NextChunk(rest); err != nil {
			return nil, fmt.Errorf("result: %w", err)
		}
		ct, err := codec.DecodeCiphertext(chunk, p, 1, 0, "result ciphertext")
		if err != nil {
			return nil, err
		}
		r.Ciphertexts = append(r.Ciphertexts, ct)
	}
	want1 := len(r.Spans)
	if r.Mode == Membership {
		want1 = 1
	}
	if len(r.Ciphertexts) != want1 {
		return nil, fmt.Errorf("%w: result holds %d ciphertexts, expected %d", errs.ErrCorrupt, len(r.Ciphertexts), want1)
	}
	return r, nil
}

// MarshalQuery frames a query ciphertext.
func MarshalQuery(h envelope.Header, ct *rlwe.Ciphertext) ([]byte, error) {
	b, err := ct.MarshalBinary()
	if err != nil {
		return nil, err
	}
	h.Kind = KindQuery
	return envelope.Seal(h, b), nil
}

// UnmarshalQuery opens a framed query and checks that it is a fresh
// ciphertext at the top level with the default scale.
func UnmarshalQuery(data []byte, want envelope.Header, p ckks.Parameters) (*rlwe.Ciphertext, error) {
	want.Kind = KindQuery
	payload, err := envelope.OpenExpect(data, want)
	if err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	ct, err := codec.DecodeCiphertext(payload, p, 1, p.MaxLevel(), "query ciphertext")
	if err != nil {
		return nil, err
	}
	if ct.Scale.Cmp(p.DefaultScale()) != 0 {
		return nil, fmt.Errorf("%w: query ciphertext has degree %d, level %d and scale 2^%.1f; expected 1, %d and 2^%.1f",
			errs.ErrCorrupt, ct.Degree(), ct.Level(), ct.Scale.Log2(), p.MaxLevel(), p.DefaultScale().Log2())
	}
	return ct, nil
}
