// Package result defines the wire format of queries and search results, the
// only ciphertexts that travel between client and server.
//
// A query is one framed ciphertext (kind "query"). A result (kind "result")
// is a JSON header followed by ciphertexts: one for membership (slot 0 holds
// the number of matches over the whole gallery), one per group for
// identification (slot t of group g is 1 when gallery entry
// groups[g].start + t matches, else 0), and for payload fetch the few
// ciphertexts of cells that package payload lays out (its header says how).
// None ever holds a similarity score.
package result

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"

	"encmatch/core/base/codec"
	"encmatch/core/base/envelope"
	"encmatch/core/base/errs"
	"encmatch/core/face/payload"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// Envelope kinds.
const (
	KindQuery  = "query"
	KindResult = "result"
)

// Mode is what a search answers: Membership, Identification or Payload.
type Mode string

// Search modes.
const (
	// Membership answers whether any entry matches (and how many).
	Membership Mode = "membership"
	// Identification answers which entries match.
	Identification Mode = "identification"
	// Payload returns the payloads of the matching records (package payload).
	Payload Mode = "payload"
)

// Check refuses a mode that is none of the three.
func (m Mode) Check() error {
	if m != Membership && m != Identification && m != Payload {
		return fmt.Errorf("%w: unknown search mode %q (want %q, %q or %q)", errs.ErrInvalid, string(m), Membership, Identification, Payload)
	}
	return nil
}

// ParseMode is the mode named s, or an error naming the three.
func ParseMode(s string) (Mode, error) {
	return Mode(s), Mode(s).Check()
}

// Span is the gallery range a group covers.
type Span struct {
	Start int `json:"start"`
	Count int `json:"count"`
}

// Header describes a result.
type Header struct {
	Mode  Mode    `json:"mode"`
	Delta float64 `json:"delta"`
	// Rule is the index's threshold rule (">" or ">=", empty: ">="), which
	// decides the outputs that are not clean (Read).
	Rule  string `json:"rule,omitempty"`
	Total int    `json:"total"`
	Spans []Span `json:"groups"`
	// Layout is the payload result's cells (mode payload only).
	Layout *payload.Layout `json:"layout,omitempty"`
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
	out := &Result{Header: Header{Mode: first.Mode, Delta: first.Delta, Rule: first.Rule, Total: first.Total, Layout: first.Layout}}
	type group struct {
		span Span
		ct   *rlwe.Ciphertext
	}
	var groups []group
	for i, r := range parts {
		if r.Mode != first.Mode || r.Delta != first.Delta || r.Rule != first.Rule || r.Total != first.Total || (r.Layout == nil) != (first.Layout == nil) || (r.Layout != nil && *r.Layout != *first.Layout) {
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
	// Membership counts and payload cells add up (a payload layout places
	// every group by its index in the whole index).
	eval := ckks.NewEvaluator(p, nil)
	for k := range first.Ciphertexts {
		sum := first.Ciphertexts[k].CopyNew()
		for i, r := range parts[1:] {
			if len(r.Ciphertexts) != len(first.Ciphertexts) {
				return nil, fmt.Errorf("%w: part %d holds %d ciphertexts, part 0 %d", errs.ErrMismatch, i+1, len(r.Ciphertexts), len(first.Ciphertexts))
			}
			ct := r.Ciphertexts[k]
			if ct.Level() != sum.Level() || ct.Scale.Cmp(sum.Scale) != 0 {
				return nil, fmt.Errorf("%w: part %d's count is at level %d and scale 2^%.1f, part 0's at level %d and scale 2^%.1f",
					errs.ErrMismatch, i+1, ct.Level(), ct.Scale.Log2(), sum.Level(), sum.Scale.Log2())
			}
			if err := eval.Add(sum, ct, sum); err != nil {
				return nil, fmt.Errorf("merging counts: %w", err)
			}
		}
		out.Ciphertexts = append(out.Ciphertexts, sum)
	}
	return out, nil
}

// Answer is what decrypting a result tells: the number of matches
// (membership) or the matching gallery positions (identification).
type Answer struct {
	Mode  Mode    `json:"mode"`
	Delta float64 `json:"delta"`
	Total int     `json:"total"`
	// Membership: the number of matches, rounded, and as decrypted.
	Count    int     `json:"count"`
	RawCount float64 `json:"raw_count"`
	// Identification and payload: matching gallery positions, ascending.
	Matches []int `json:"matches"`
	// Payload: the bound and width, the decoded records sorted by payload,
	// and whether the answer is whole (see payload.Answer).
	Bound      int              `json:"bound,omitempty"`
	Width      int              `json:"width,omitempty"`
	Records    []payload.Record `json:"records,omitempty"`
	Complete   bool             `json:"complete"`
	Unresolved int              `json:"unresolved"`
	Uncertain  int              `json:"uncertain"`
	// Identification: the positions whose decrypted output was not clean
	// (farther than CleanTolerance from 0 and 1: a score within the
	// comparator's value band of delta), ascending; each is in Matches or
	// not as the rule decides its value.
	UncertainPositions []int `json:"uncertain_positions,omitempty"`
	// Membership: the decrypted count is farther than CleanTolerance from
	// an integer (scores within the value band of delta added fractions).
	Approximate bool    `json:"approximate"`
	Seconds     float64 `json:"seconds"`
}

// CleanTolerance is how close to 0 or 1 a decrypted comparator output
// (and to an integer a membership count) must be to be clean. Outside the
// value band honest outputs are within 2^-21 of 0 or 1, plus CKKS noise
// far smaller than this.
const CleanTolerance = 1e-3

// decide is the match bit of a comparator output v under rule: a clean
// value is its nearest bit; a value that is not clean (a score near delta)
// matches above 1/2, and at 1/2 exactly as the rule says of a tie.
func decide(v float64, rule string) bool {
	if rule == ">" {
		return v > 0.5
	}
	return v >= 0.5
}

// SlotTolerance is how far outside [0, 1] a decrypted comparator output
// may lie. Honest outputs are within 2^-21 of [0, 1] plus CKKS noise at
// every depth and threshold (docs/COMPARATOR.md; TestHonestOutputsStayInRange
// sweeps every kappa), so 1/2 is never reached by an honest result, while a
// result that does not decrypt under this key (a query encrypted under
// another key set but labelled with this one's id, say) decrypts to noise
// of the size of q0 / scale (about 2^15) in every slot.
const SlotTolerance = 0.5

// ForeignKeyMessage is the message of a result whose decrypted values no
// honest result under this key set can have.
const ForeignKeyMessage = "result does not decrypt under this key set (a query made under another key?)"

// countTolerance is how far outside [0, total] an honest membership count
// may lie: half a match, plus 2^-12 per entry (each slot's output is within
// 2^-21 of [0, 1] and CKKS noise is far smaller).
func countTolerance(total int) float64 { return 0.5 + float64(total)/4096 }

// Read turns the decrypted slot values of r's ciphertexts (values[i] for
// r.Ciphertexts[i]) into the answer, refusing a result that does not cover
// the whole gallery and values no honest result under this key can have:
// every slot of a membership result holds the count (an inner sum), which
// must lie within [0, Total] up to countTolerance; every slot of an
// identification group is a comparator output, which must lie within
// [0, 1] up to SlotTolerance. Values outside these bounds are reported as
// ErrMismatch: the result was not made under this key set.
func (r *Result) Read(values [][]float64) (*Answer, error) {
	if err := r.CheckComplete(); err != nil {
		return nil, err
	}
	if len(values) != len(r.Ciphertexts) {
		return nil, fmt.Errorf("%w: %d decrypted ciphertexts for a result of %d", errs.ErrInvalid, len(values), len(r.Ciphertexts))
	}
	out := &Answer{Mode: r.Mode, Delta: r.Delta, Total: r.Total, Matches: []int{}, Complete: true}
	foreign := func(what string, v float64) error {
		return fmt.Errorf("%w: %s (%s decrypts to %v)", errs.ErrMismatch, ForeignKeyMessage, what, v)
	}
	if r.Mode == Payload {
		// A cell sums at most Layout.MaxCellValue: a foreign key's noise is
		// about 2^24 at the payload result's scale.
		hi := r.Layout.MaxCellValue() + SlotTolerance
		for i, vs := range values {
			for t, v := range vs {
				if !(v >= -SlotTolerance && v <= hi) {
					return nil, foreign(fmt.Sprintf("payload ciphertext %d slot %d", i, t), v)
				}
			}
		}
		spans := make([]payload.Span, len(r.Spans))
		for i, sp := range r.Spans {
			spans[i] = payload.Span{Index: i, Start: sp.Start, Count: sp.Count}
		}
		a, err := payload.Decode(*r.Layout, spans, values)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errs.ErrCorrupt, err)
		}
		out.Count, out.RawCount, out.Records = a.Count, a.RawCount, a.Records
		out.Complete, out.Unresolved, out.Uncertain = a.Complete, a.Unresolved, a.Uncertain
		out.Bound, out.Width = r.Layout.Bound, r.Layout.Width
		for _, rec := range a.Records {
			out.Matches = append(out.Matches, rec.Position)
		}
		sort.Ints(out.Matches)
		return out, nil
	}
	if r.Mode == Membership {
		if len(values[0]) == 0 {
			return nil, fmt.Errorf("%w: no decrypted slots", errs.ErrInvalid)
		}
		tol := countTolerance(r.Total)
		lo, hi := -tol, float64(r.Total)+tol
		for i, v := range values[0] {
			if !(v >= lo && v <= hi) {
				return nil, foreign(fmt.Sprintf("membership count slot %d of a gallery of %d entries", i, r.Total), v)
			}
		}
		v := values[0][0]
		out.RawCount = v
		out.Count = min(int(math.Round(math.Max(v, 0))), r.Total)
		out.Approximate = math.Abs(v-math.Round(v)) > CleanTolerance
		return out, nil
	}
	for g, span := range r.Spans {
		if span.Count > len(values[g]) {
			return nil, fmt.Errorf("%w: group %d claims %d entries", errs.ErrCorrupt, g, span.Count)
		}
		for t, v := range values[g] {
			if !(v >= -SlotTolerance && v <= 1+SlotTolerance) {
				return nil, foreign(fmt.Sprintf("group %d slot %d", g, t), v)
			}
		}
		for t := 0; t < span.Count; t++ {
			v := values[g][t]
			if math.Min(math.Abs(v), math.Abs(1-v)) > CleanTolerance {
				out.UncertainPositions = append(out.UncertainPositions, span.Start+t)
			}
			if decide(v, r.Rule) {
				out.Matches = append(out.Matches, span.Start+t)
			}
		}
	}
	sort.Ints(out.Matches)
	sort.Ints(out.UncertainPositions)
	out.Uncertain = len(out.UncertainPositions)
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
	if err := r.Mode.Check(); err != nil {
		return nil, fmt.Errorf("%w: result: %v", errs.ErrCorrupt, err)
	}
	if err := r.checkHeader(p); err != nil {
		return nil, err
	}
	// Every ciphertext chunk has the same, known size: the count is fixed
	// before any is decoded.
	ctSize := codec.CiphertextSize(p, 1, 0)
	if n := len(rest) / (8 + ctSize); len(rest) != n*(8+ctSize) || n != r.ciphertextCount() {
		return nil, fmt.Errorf("%w: result holds %d bytes of ciphertexts, expected %d ciphertexts of %d bytes", errs.ErrCorrupt, len(rest), r.ciphertextCount(), ctSize)
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
	if len(r.Ciphertexts) != r.ciphertextCount() {
		return nil, fmt.Errorf("%w: result holds %d ciphertexts, expected %d", errs.ErrCorrupt, len(r.Ciphertexts), r.ciphertextCount())
	}
	return r, nil
}

// ciphertextCount is the number of ciphertexts a result with this header
// holds: one for membership, one per group for identification.
func (h *Header) ciphertextCount() int {
	switch h.Mode {
	case Membership:
		return 1
	case Payload:
		return h.Layout.Ciphertexts()
	}
	return len(h.Spans)
}

// MaxTotal bounds a result's gallery size (2^40 entries).
const MaxTotal = 1 << 40

// checkHeader refuses a decoded header with values no result can have: a
// threshold outside (-1, 1), a gallery size outside [0, MaxTotal], groups
// of more entries than a ciphertext has slots, overlapping groups or groups
// outside the gallery.
func (h *Header) checkHeader(p ckks.Parameters) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: result header: %s", errs.ErrCorrupt, fmt.Sprintf(format, a...))
	}
	if math.IsNaN(h.Delta) || h.Delta <= -1 || h.Delta >= 1 {
		return bad("threshold %v outside (-1, 1)", h.Delta)
	}
	if h.Total < 0 || h.Total > MaxTotal {
		return bad("gallery of %d entries", h.Total)
	}
	for _, sp := range h.Spans {
		if sp.Start < 0 || sp.Start > MaxTotal || sp.Count < 0 || sp.Count > p.MaxSlots() {
			return bad("group [%d, +%d) with %d slots per ciphertext", sp.Start, sp.Count, p.MaxSlots())
		}
	}
	if _, err := h.Missing(); err != nil {
		return err
	}
	if (h.Mode == Payload) != (h.Layout != nil) {
		return bad("a %s result with%s a payload layout", h.Mode, map[bool]string{true: "", false: "out"}[h.Layout != nil])
	}
	if h.Layout != nil {
		// The layout must be the one its public inputs give: nothing else
		// decodes.
		l := *h.Layout
		want, err := payload.NewLayout(p.MaxSlots(), l.Groups, l.Width, l.Bound)
		if err != nil || want != l || (len(h.Spans) > 0 && len(h.Spans) > l.Groups) {
			return bad("payload layout %+v is not one these parameters make (%v)", l, err)
		}
	}
	return nil
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
