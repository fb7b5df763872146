package result

import (
	"encmatch/core/internal/fuzzpatch"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"encmatch/core/base/comparator"
	"encmatch/core/base/envelope"
	"encmatch/core/base/errs"
	"encmatch/core/base/params"
	"encmatch/core/face/payload"

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

// fuzzFrame fuzzes decode with the payload of a valid frame patched at an
// offset the fuzzer chooses, then sealed again (checksum recomputed), so
// that the decoders behind the frame check are exercised.
func fuzzFrame(f *testing.F, h envelope.Header, payload []byte, decode func([]byte) error) {
	f.Add(uint16(0), []byte{})
	f.Add(uint16(9), []byte(`{"mode":"identification","delta":0.5,"total":3,"groups":[{"start":0,"count":2}]}`))
	f.Add(uint16(20), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f})
	f.Add(uint16(len(payload)-8), []byte{1})
	f.Add(uint16(100), []byte{0xA5, 1, 2, 3})
	f.Fuzz(func(t *testing.T, at uint16, patch []byte) {
		err := decode(envelope.Seal(h, fuzzpatch.Patched(payload, int(at), patch)))
		if err != nil && !errors.Is(err, errs.ErrCorrupt) && !errors.Is(err, errs.ErrMismatch) {
			t.Fatalf("error of another kind: %v", err)
		}
	})
}

// FuzzUnmarshal fuzzes the result decoder (header JSON, chunks,
// ciphertexts) with a valid two-group identification result of fuzzpatch.TinyParams.
func FuzzUnmarshal(f *testing.F) {
	p := fuzzpatch.TinyParams()
	h := hdr
	h.Kind = KindResult
	r, err := Marshal(hdr, &Result{Header: Header{Mode: Identification, Delta: 0.5, Total: 3, Spans: []Span{{0, 2}, {2, 1}}},
		Ciphertexts: []*rlwe.Ciphertext{sample(f, p, 0), sample(f, p, 0)}})
	if err != nil {
		f.Fatal(err)
	}
	_, payload, _ := envelope.Open(r)
	fuzzFrame(f, h, payload, func(b []byte) error { _, err := Unmarshal(b, hdr, p); return err })
}

// FuzzUnmarshalQuery fuzzes the query decoder with a valid query of
// fuzzpatch.TinyParams.
func FuzzUnmarshalQuery(f *testing.F) {
	p := fuzzpatch.TinyParams()
	h := hdr
	h.Kind = KindQuery
	q, err := MarshalQuery(hdr, sample(f, p, p.MaxLevel()))
	if err != nil {
		f.Fatal(err)
	}
	_, payload, _ := envelope.Open(q)
	fuzzFrame(f, h, payload, func(b []byte) error { _, err := UnmarshalQuery(b, hdr, p); return err })
}

// TestUnmarshalRefusesImpossibleHeaders: header values no result has.
func TestUnmarshalRefusesImpossibleHeaders(t *testing.T) {
	p := fuzzpatch.TinyParams()
	for _, h := range []Header{
		{Mode: Membership, Delta: 2, Total: 1},
		{Mode: Membership, Delta: math.NaN(), Total: 1},
		{Mode: Membership, Total: -1},
		{Mode: Membership, Total: 10, Spans: []Span{{math.MaxInt - 1, 5}}},
		{Mode: Membership, Total: 10, Spans: []Span{{0, 5}, {3, 5}}},
		{Mode: Membership, Total: 100, Spans: []Span{{0, 100}}}, // more than the 8 slots
	} {
		b, err := Marshal(hdr, &Result{Header: h, Ciphertexts: []*rlwe.Ciphertext{sample(t, p, 0)}})
		if err != nil {
			continue // NaN does not marshal: nothing to test
		}
		if _, err := Unmarshal(b, hdr, p); !errors.Is(err, errs.ErrCorrupt) {
			t.Errorf("%+v accepted: %v", h, err)
		}
	}
}

// TestHonestOutputsStayInRange checks SlotTolerance against the comparator
// itself: for every supported depth and thresholds across (-1, 1), the
// plaintext model (which the encrypted outputs follow to 2^-22) stays
// within 2^-10 of [0, 1] for every score a query can produce: cosine
// scores s with |s| <= 1 / DefaultScoreScale = 1 + 1/128 (the margin the
// score scale leaves for CKKS noise; beyond it the scaled score leaves
// [-1, 1], where the polynomials are not bounded), far inside the
// tolerance. -short checks the lowest and the default depth only.
func TestHonestOutputsStayInRange(t *testing.T) {
	lo, hi := comparator.KappaRange()
	kappas := []int{}
	for k := lo; k <= hi; k++ {
		if !testing.Short() || k == lo || k == params.DefaultKappa {
			kappas = append(kappas, k)
		}
	}
	worst := 0.0
	for _, kappa := range kappas {
		for _, delta := range []float64{-0.9, 0, 0.5, 0.9} {
			c, err := comparator.New(kappa, delta, comparator.DefaultScoreScale)
			if err != nil {
				t.Fatal(err)
			}
			edge := 1 / comparator.DefaultScoreScale
			for s := -edge; s <= edge; s += 1.0 / (1 << 13) {
				v := c.Model(s)
				worst = math.Max(worst, math.Max(-v, v-1))
				if v < -1.0/1024 || v > 1+1.0/1024 {
					t.Fatalf("kappa %d delta %v: f(%v) = %v", kappa, delta, s, v)
				}
			}
		}
	}
	t.Logf("largest excursion outside [0, 1]: %.3g (tolerance %v)", worst, SlotTolerance)
}

// TestForeignKeyResultIsRefused: a result decrypted under a key other than
// the one it was made under decrypts to noise, which Read refuses as a
// mismatch (issue 14 item 10: a query under another key set, labelled with
// this one's id, once decrypted to a count of 2,250 on 1,500 entries).
// The honest decryption of the same ciphertexts reads fine.
func TestForeignKeyResultIsRefused(t *testing.T) {
	set, err := params.New(params.Toy, params.MinKappa, 8)
	if err != nil {
		t.Fatal(err)
	}
	p := set.CKKS
	slots := p.MaxSlots()
	ecd := ckks.NewEncoder(p)
	kgen := rlwe.NewKeyGenerator(p)
	mine, theirs := kgen.GenSecretKeyNew(), kgen.GenSecretKeyNew()
	encrypt := func(v []float64) *rlwe.Ciphertext {
		pt := ckks.NewPlaintext(p, 0)
		if err := ecd.Encode(v, pt); err != nil {
			t.Fatal(err)
		}
		ct, err := rlwe.NewEncryptor(p, theirs).EncryptNew(pt)
		if err != nil {
			t.Fatal(err)
		}
		return ct
	}
	decrypt := func(sk *rlwe.SecretKey, cts []*rlwe.Ciphertext) [][]float64 {
		out := make([][]float64, len(cts))
		for i, ct := range cts {
			out[i] = make([]float64, slots)
			if err := ecd.Decode(rlwe.NewDecryptor(p, sk).DecryptNew(ct), out[i]); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	const total = 1500
	count := make([]float64, slots)
	for i := range count {
		count[i] = 7
	}
	bits := make([]float64, slots)
	for i := range bits {
		bits[i] = float64(i % 2)
	}
	results := []*Result{
		{Header: Header{Mode: Membership, Delta: 0.5, Total: total, Spans: []Span{{0, total}}}, Ciphertexts: []*rlwe.Ciphertext{encrypt(count)}},
		{Header: Header{Mode: Identification, Delta: 0.5, Total: 3, Spans: []Span{{0, 3}}}, Ciphertexts: []*rlwe.Ciphertext{encrypt(bits)}},
	}
	for _, r := range results {
		ans, err := r.Read(decrypt(theirs, r.Ciphertexts))
		if err != nil {
			t.Fatalf("%s: honest result refused: %v", r.Mode, err)
		}
		if (r.Mode == Membership && ans.Count != 7) || (r.Mode == Identification && !reflect.DeepEqual(ans.Matches, []int{1})) {
			t.Fatalf("%s: %+v", r.Mode, ans)
		}
		_, err = r.Read(decrypt(mine, r.Ciphertexts))
		if !errors.Is(err, errs.ErrMismatch) || !strings.Contains(err.Error(), ForeignKeyMessage) {
			t.Fatalf("%s: foreign result read: %v", r.Mode, err)
		}
	}
}

// TestReadBounds: the tolerances at their edges.
func TestReadBounds(t *testing.T) {
	r := &Result{Header: Header{Mode: Membership, Total: 10, Spans: []Span{{0, 10}}}, Ciphertexts: make([]*rlwe.Ciphertext, 1)}
	for v, ok := range map[float64]bool{-0.4: true, 10.4: true, 10.6: false, -0.6: false, math.NaN(): false, 0: true} {
		ans, err := r.Read([][]float64{{v, v}})
		if ok != (err == nil) {
			t.Errorf("count %v: %v", v, err)
		}
		if ok && (ans.Count < 0 || ans.Count > 10) {
			t.Errorf("count %v read as %d", v, ans.Count)
		}
	}
	r = &Result{Header: Header{Mode: Identification, Total: 2, Spans: []Span{{0, 2}}}, Ciphertexts: make([]*rlwe.Ciphertext, 1)}
	for v, ok := range map[float64]bool{-0.49: true, 1.49: true, 1.51: false, -0.51: false, math.Inf(1): false} {
		if _, err := r.Read([][]float64{{0, 1, v}}); ok != (err == nil) {
			t.Errorf("slot value %v: %v", v, err)
		}
	}
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

// FuzzUnmarshalPayload fuzzes the result decoder with a valid payload
// result of fuzzpatch.TinyParams (8 slots: a layout of 8 cells, 12
// ciphertexts), whose header carries the layout it must re-derive.
func FuzzUnmarshalPayload(f *testing.F) {
	p := fuzzpatch.TinyParams()
	h := hdr
	h.Kind = KindResult
	l, err := payload.NewLayout(p.MaxSlots(), 1, 1, 1)
	if err != nil {
		f.Fatal(err)
	}
	var cts []*rlwe.Ciphertext
	for i := 0; i < l.Ciphertexts(); i++ {
		cts = append(cts, sample(f, p, 0))
	}
	r, err := Marshal(hdr, &Result{Header: Header{Mode: Payload, Delta: 0.5, Total: 5, Spans: []Span{{0, 5}}, Layout: &l}, Ciphertexts: cts})
	if err != nil {
		f.Fatal(err)
	}
	if _, err := Unmarshal(r, hdr, p); err != nil {
		f.Fatalf("the valid payload result is refused: %v", err)
	}
	_, body, _ := envelope.Open(r)
	fuzzFrame(f, h, body, func(b []byte) error { _, err := Unmarshal(b, hdr, p); return err })
}
