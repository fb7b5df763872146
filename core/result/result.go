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
	"math"
	"sort"
	"strings"

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

// Missing returns the gallery ranges in [0, Total) that no span covers,
// refusing spans that overlap or fall outside the gallery.
func (h *Header) Missing() ([]Span, error) {
	spans := append([]Span(nil), h.Spans...)
	sort.Slice(spans, func(i, j int) bool { return spans[i].Start < spans[j].Start })
	var missing []Span
	next := 0
	for _, sp := range spans {
		if sp.Count < 0 || sp.Start < next || sp.Start+sp.Count > h.Total {
			return nil, fmt.Errorf("%w: result group [%d, %d) overlaps another or lies outside the gallery of %d entries", errs.ErrCorrupt, sp.Start, sp.Start+sp.Count, h.Total)
		}
		if sp.Start > next {
			missing = append(missing, Span{Start: next, Count: sp.Start - next})
		}
		next = sp.Start + sp.Count
	}
	if next < h.Total {
		missing = append(missing, Span{Start: next, Count: h.Total - next})
	}
	return missing, nil
}

// CheckComplete refuses a result that does not cover the whole gallery (a
// shard's partial result, or a merge that lost a shard): a partial answer
// must never pass for a complete one.
func (h *Header) CheckComplete() error {
	missing, err := h.Missing()
	if err != nil || len(missing) == 0 {
		return err
	}
	covered := h.Total
	var ranges []string
	for _, m := range missing {
		covered -= m.Count
		ranges = append(ranges, fmt.Sprintf("[%d, %d)", m.Start, m.Start+m.Count))
	}
	return fmt.Errorf("%w: incomplete result: it covers %d of the gallery's %d entries; entries %s were not searched",
		errs.ErrInvalid, covered, h.Total, strings.Join(ranges, ", "))
}

// Merge combines the results of disjoint shards of one index for one query:
// membership counts are added (ciphertext addition), identification groups
// are concatenated in gallery order. The parts must share mode, threshold
// and gallery size, and their groups must not overlap; the merge may still
// be partial (CheckComplete tells).
func Merge(p ckks.Parameters, parts []*Result) (*Result, error) {
	if len(parts) == 0 {
		return nil, fmt.Errorf("%w: nothing to merge", errs.ErrInvalid)
	}
	first := parts[0]
	out := &Result{Header: Header{Mode: first.Mode, Delta: first.Delta, Total: first.Total}}
	type group struct {
		span Span
		ct   *rlwe.Ciphertext
	}
	var groups []group
	for i, r := range parts {
		if r.Mode != first.Mode || r.Delta != first.Delta || r.Total != first.Total {
			return nil, fmt.Errorf("%w: part %d is a %s result at delta %v over %d entries, part 0 a %s result at delta %v over %d",
				errs.ErrMismatch, i, r.Mode, r.Delta, r.Total, first.Mode, first.Delta, first.Total)
		}
		out.Spans = append(out.Spans, r.Spans...)
		if r.Mode == Identification {
			for g, sp := range r.Spans {
				groups = append(groups, group{sp, r.Ciphertexts[g]})
			}
		}
	}
	if _, err := out.Missing(); err != nil {
		return nil, err
	}
	sort.Slice(out.Spans, func(i, j int) bool { return out.Spans[i].Start < out.Spans[j].Start })
	if first.Mode == Identification {
		sort.Slice(groups, func(i, j int) bool { return groups[i].span.Start < groups[j].span.Start })
		for _, g := range groups {
			out.Ciphertexts = append(out.Ciphertexts, g.ct)
		}
		return out, nil
	}
	sum := first.Ciphertexts[0].CopyNew()
	eval := ckks.NewEvaluator(p, nil)
	for i, r := range parts[1:] {
		ct := r.Ciphertexts[0]
		if ct.Level() != sum.Level() || ct.Scale.Cmp(sum.Scale) != 0 {
			return nil, fmt.Errorf("%w: part %d's count is at level %d and scale 2^%.1f, part 0's at level %d and scale 2^%.1f",
				errs.ErrMismatch, i+1, ct.Level(), ct.Scale.Log2(), sum.Level(), sum.Scale.Log2())
		}
		if err := eval.Add(sum, ct, sum); err != nil {
			return nil, fmt.Errorf("merging counts: %w", err)
		}
	}
	out.Ciphertexts = []*rlwe.Ciphertext{sum}
	return out, nil
}

// Answer is what decrypting a result tells: the number of matches
// (membership) or the matching gallery positions (identification).
type Answer struct {
	Mode  string  `json:"mode"`
	Delta float64 `json:"delta"`
	Total int     `json:"total"`
	// Membership: the number of matches, rounded, and as decrypted.
	Count    int     `json:"count"`
	RawCount float64 `json:"raw_count"`
	// Identification: matching gallery positions, ascending.
	Matches []int   `json:"matches"`
	Seconds float64 `json:"seconds"`
}

// Read turns the decrypted slot values of r's ciphertexts (values[i] for
// r.Ciphertexts[i]) into the answer, refusing a result that does not cover
// the whole gallery and values no honest result under this key can have.
func (r *Result) Read(values [][]float64) (*Answer, error) {
	if err := r.CheckComplete(); err != nil {
		return nil, err
	}
	if len(values) != len(r.Ciphertexts) {
		return nil, fmt.Errorf("%w: %d decrypted ciphertexts for a result of %d", errs.ErrInvalid, len(values), len(r.Ciphertexts))
	}
	out := &Answer{Mode: r.Mode, Delta: r.Delta, Total: r.Total, Matches: []int{}}
	if r.Mode == Membership {
		v := values[0][0]
		out.RawCount = v
		if math.IsNaN(v) || math.Abs(v) > float64(2*r.Total+1) {
			return nil, fmt.Errorf("%w: membership count %v is out of range: the result was not made under this key", errs.ErrCorrupt, v)
		}
		out.Count = int(math.Round(math.Max(v, 0)))
		return out, nil
	}
	for g, span := range r.Spans {
		if span.Count > len(values[g]) {
			return nil, fmt.Errorf("%w: group %d claims %d entries", errs.ErrCorrupt, g, span.Count)
		}
		for t := 0; t < span.Count; t++ {
			if values[g][t] >= 0.5 {
				out.Matches = append(out.Matches, span.Start+t)
			}
		}
	}
	sort.Ints(out.Matches)
	return out, nil
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
