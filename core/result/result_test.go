package result

import (
	"errors"
	"reflect"
	"testing"

	"encmatch/core/envelope"
	"encmatch/core/errs"
	"encmatch/core/params"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

func toy(t testing.TB) ckks.Parameters {
	set, err := params.New(params.Toy, params.MinKappa, 8)
	if err != nil {
		t.Fatal(err)
	}
	return set.CKKS
}

var hdr = envelope.Header{Fingerprint: "fp", KeyID: "key"}

func sample(t testing.TB, p ckks.Parameters, level int) *rlwe.Ciphertext {
	sk := rlwe.NewKeyGenerator(p).GenSecretKeyNew()
	pt := ckks.NewPlaintext(p, level)
	ct, err := rlwe.NewEncryptor(p, sk).EncryptNew(pt)
	if err != nil {
		t.Fatal(err)
	}
	return ct
}

func TestRoundTrips(t *testing.T) {
	p := toy(t)
	q, err := MarshalQuery(hdr, sample(t, p, p.MaxLevel()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := UnmarshalQuery(q, hdr, p); err != nil {
		t.Fatal(err)
	}
	low, _ := MarshalQuery(hdr, sample(t, p, 0))
	if _, err := UnmarshalQuery(low, hdr, p); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("query at level 0 accepted: %v", err)
	}
	r := &Result{Header: Header{Mode: Identification, Total: 3, Spans: []Span{{0, 2}, {2, 1}}},
		Ciphertexts: []*rlwe.Ciphertext{sample(t, p, 0), sample(t, p, 0)}}
	b, err := Marshal(hdr, r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Unmarshal(b, hdr, p)
	if err != nil || len(got.Ciphertexts) != 2 || got.Spans[1].Start != 2 {
		t.Fatalf("%v %+v", err, got)
	}
	r.Ciphertexts = r.Ciphertexts[:1]
	b, _ = Marshal(hdr, r)
	if _, err := Unmarshal(b, hdr, p); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("missing group ciphertext accepted: %v", err)
	}
	if _, err := Unmarshal(q, hdr, p); !errors.Is(err, errs.ErrMismatch) {
		t.Fatalf("a query taken for a result: %v", err)
	}
}

// FuzzUnmarshal feeds arbitrary bytes to the query and result decoders; the
// seeds are valid frames whose payloads the fuzzer mutates behind a
// recomputed checksum, so the Lattigo decoders themselves are exercised.
func FuzzUnmarshal(f *testing.F) {
	p := toy(f)
	q, _ := MarshalQuery(hdr, sample(f, p, p.MaxLevel()))
	_, qp, _ := envelope.Open(q)
	r, _ := Marshal(hdr, &Result{Header: Header{Mode: Membership, Total: 1}, Ciphertexts: []*rlwe.Ciphertext{sample(f, p, 0)}})
	_, rp, _ := envelope.Open(r)
	f.Add(qp[:200], true)
	f.Add(rp[:300], false)
	f.Add([]byte{}, false)
	f.Fuzz(func(t *testing.T, payload []byte, isQuery bool) {
		if isQuery {
			h := hdr
			h.Kind = KindQuery
			UnmarshalQuery(envelope.Seal(h, payload), hdr, p)
			return
		}
		h := hdr
		h.Kind = KindResult
		Unmarshal(envelope.Seal(h, payload), hdr, p)
	})
}

// TestMissingSpans: the gaps a header's groups leave in the gallery, and
// the groups it refuses.
func TestMissingSpans(t *testing.T) {
	cases := []struct {
		spans   []Span
		total   int
		missing []Span
		bad     bool
	}{
		{[]Span{{0, 10}, {10, 5}}, 15, nil, false},
		{[]Span{{10, 5}, {0, 10}}, 15, nil, false},
		{[]Span{{10, 5}}, 15, []Span{{0, 10}}, false},
		{[]Span{{0, 4}, {8, 2}}, 12, []Span{{4, 4}, {10, 2}}, false},
		{[]Span{{0, 10}, {5, 10}}, 15, nil, true},
		{[]Span{{0, 16}}, 15, nil, true},
		{[]Span{{0, -1}}, 15, nil, true},
	}
	for _, c := range cases {
		h := Header{Mode: Membership, Total: c.total, Spans: c.spans}
		missing, err := h.Missing()
		if c.bad {
			if !errors.Is(err, errs.ErrCorrupt) {
				t.Errorf("%v: want ErrCorrupt, got %v", c.spans, err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(missing, c.missing) {
			t.Errorf("%v: missing %v (%v), want %v", c.spans, missing, err, c.missing)
		}
		if complete := h.CheckComplete(); (complete == nil) != (len(c.missing) == 0) || (complete != nil && !errors.Is(complete, errs.ErrInvalid)) {
			t.Errorf("%v: CheckComplete %v", c.spans, complete)
		}
	}
}
