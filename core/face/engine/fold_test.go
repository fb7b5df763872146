package engine

import (
	"math"
	"math/rand"
	"reflect"
	"testing"

	"encmatch/core/base/envelope"
	"encmatch/core/base/packing"
	"encmatch/core/base/params"
	"encmatch/core/face/index"
	"encmatch/core/face/keys"
	"encmatch/core/face/result"
	"encmatch/core/face/strategy"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// skewed returns a unit vector whose first half carries weight w of its
// squared norm (the halves of a folded vector differ in norm).
func skewed(rng *rand.Rand, dim int, w float64) []float64 {
	v := randomUnit(rng, dim)
	h := params.PaddedDim(dim) / 2
	var lo, hi float64
	for i, x := range v {
		if i < h {
			lo += x * x
		} else {
			hi += x * x
		}
	}
	for i := range v {
		if i < h {
			v[i] *= math.Sqrt(w / lo)
		} else {
			v[i] *= math.Sqrt((1 - w) / hi)
		}
	}
	return unit(v)
}

// TestEndToEndFolded runs folded key sets (half the diagonals, the real part
// taken once per group) through the strategies, both enrollments, in memory
// and streamed: every decision outside the band equals brute force, with
// planted scores crowding delta on both sides, a query whose halves differ
// in norm (90 % of it in one half) and gallery vectors skewed either way.
func TestEndToEndFolded(t *testing.T) {
	const dim, delta = 24, 0.5 // padded 32, folded block 16
	cases := []struct {
		name           string
		n1             int
		stream, seeded bool
	}{{strategy.BSGSTBE, 4, false, true}, {strategy.BSGSTBE, 4, true, false}, {strategy.DG, 0, false, false},
		{strategy.BSGSTBS, 4, false, true}, {strategy.BSGSDiagonal, 3, true, true}}
	for _, c := range cases {
		rng := rand.New(rand.NewSource(17))
		set, err := params.New(params.Toy, 8, dim)
		if err != nil {
			t.Fatal(err)
		}
		if set, err = set.WithFold(true); err != nil {
			t.Fatal(err)
		}
		if set.L() != 16 {
			t.Fatalf("folded block %d, want 16", set.L())
		}
		f := newFixtureOf(t, set, c.name, c.n1, delta, index.CreateOptions{})
		q := skewed(rng, dim, 0.9)
		gal := gallery(rng, q, 2300, []float64{0.53, 0.51, 0.505, 0.502, 0.498, 0.495, 0.49, 0.8, 1.0})
		for i := 0; i < 200; i++ { // skewed entries, the other way round
			gal[i] = f32(skewed(rng, dim, 0.05))
		}
		if c.seeded {
			f.enrollSeeded(t, gal)
		} else {
			f.enroll(t, gal)
		}
		srv := f.open(t, c.stream)
		if m := check(t, f, srv, gal, f32(q)); len(m) < 4 {
			t.Fatalf("%s: expected the planted matches, got %v", c.name, m)
		}
		check(t, f, srv, gal, f32(skewed(rng, dim, 0.02)))
	}
}

// TestFoldNeedsComplexSlots: the conjugate-invariant ring has no imaginary
// part to fold into.
func TestFoldNeedsComplexSlots(t *testing.T) {
	set, err := params.New(params.ToyReal, 8, 24)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := set.WithFold(true); err == nil {
		t.Fatal("folding accepted on the conjugate-invariant ring")
	}
}

// TestFoldedPayloadSearch: a folded key set with the payload level fetches
// exactly the brute-force matches' payloads.
func TestFoldedPayloadSearch(t *testing.T) {
	rng := rand.New(rand.NewSource(19))
	const dim, delta, width = 64, 0.5, 3
	set, err := params.NewWith(params.Toy, 13, dim, true)
	if err == nil {
		set, err = set.WithFold(true)
	}
	if err != nil {
		t.Fatal(err)
	}
	f := newFixtureOf(t, set, strategy.BSGSTBE, 4, delta, index.CreateOptions{PayloadWidth: width})
	q := randomUnit(rng, dim)
	gal := gallery(rng, q, 2500, crowdOutsideTheBand(t, rng, 13, delta, 9, 100, 0.03))
	pay := randomPayloads(rng, len(gal), width)
	f.enrollPayloads(t, gal, pay, true)
	srv := f.open(t, false)
	rows, positions := bruteForcePayloads(srv.Manifest, gal, pay, f32(q))
	ans := payloadSearch(t, f, srv, f32(q), 16)
	if len(rows) != 9 || !ans.Complete || ans.Count != 9 || ans.Uncertain != 0 || len(ans.Records) != 9 {
		t.Fatalf("brute force %d; complete %v count %d uncertain %d records %d", len(rows), ans.Complete, ans.Count, ans.Uncertain, len(ans.Records))
	}
	for i, r := range ans.Records {
		if r.Position != positions[i] || !reflect.DeepEqual(r.Payload, rows[i]) {
			t.Fatalf("record %d is %d %v, brute force %d %v", i, r.Position, r.Payload, positions[i], rows[i])
		}
	}
}

// TestForgedFoldedQuery: a key holder encrypts, with its own code, a folded
// query whose imaginary part is not the one FoldQuery makes (junk where the
// fold expects zeros, as large as the real part). docs/LEAKAGE.md says such
// a query c = a + i b learns the comparator's bits of the real inner product
// with w = (2a, -2b) and nothing of the imaginary part: both modes must
// equal brute force with w outside the band, also for planted entries whose
// imaginary score is large and whose real score crowds delta.
func TestForgedFoldedQuery(t *testing.T) {
	const dim, delta = 24, 0.5 // padded 32: slot k holds v[k] + i v[k+16]; v[24:] is padding
	for _, name := range []string{strategy.BSGSTBE, strategy.DG} {
		rng := rand.New(rand.NewSource(23))
		set, err := params.New(params.Toy, 8, dim)
		if err == nil {
			set, err = set.WithFold(true)
		}
		if err != nil {
			t.Fatal(err)
		}
		n1 := 0
		if name == strategy.BSGSTBE {
			n1 = 4
		}
		f := newFixtureOf(t, set, name, n1, delta, index.CreateOptions{})
		h := set.Padded() / 2
		// The crafted slots: a = w_lo / 2 and b = -w_hi / 2 where the fold
		// puts them, random junk of the real part's size where the fold
		// expects zeros (b_k for the slots whose high half is padding).
		w := randomUnit(rng, dim)
		c := make([]complex128, h)
		for k := range c {
			b := 0.5 * rng.NormFloat64() / math.Sqrt(dim)
			if k+h < dim {
				b = -w[k+h] / 2
			}
			c[k] = complex(w[k]/2, b)
		}
		// im is the imaginary part's functional, Im(sum_k c_k Fold(v)_k).
		im := make([]float64, dim)
		for k := range c {
			im[k] += imag(c[k])
			if k+h < dim {
				im[k+h] += real(c[k])
			}
		}
		// Planted entries: real score r, the rest of the vector along the
		// imaginary functional (orthogonal to w), so their imaginary scores
		// are as large as they can be.
		var planted [][]float32
		u := unit(orthogonal(im, w))
		for _, r := range []float64{0.53, 0.51, 0.505, 0.502, 0.498, 0.495, 0.49, 0.45, 0.2, -0.3} {
			v := make([]float64, dim)
			for i := range v {
				v[i] = r*w[i] + math.Sqrt(1-r*r)*u[i]
			}
			planted = append(planted, f32(v))
			if r == 0.498 && math.Abs(dot(im, v)) < 0.2 {
				t.Fatalf("planted entry's imaginary score %.3f is not large", dot(im, v))
			}
		}
		gal := gallery(rng, w, 1500, nil)
		gal = append(gal, planted...)
		f.enroll(t, gal)
		srv := f.open(t, false)

		ck, err := keys.LoadClient(f.keyDir)
		if err != nil {
			t.Fatal(err)
		}
		pt := ckks.NewPlaintext(set.CKKS, set.CKKS.MaxLevel())
		if err := ckks.NewEncoder(set.CKKS).Encode(packing.ReplicateQuery(c, set.Slots()), pt); err != nil {
			t.Fatal(err)
		}
		ct, err := rlwe.NewEncryptor(set.CKKS, ck.Secret).EncryptNew(pt)
		if err != nil {
			t.Fatal(err)
		}
		qb, err := result.MarshalQuery(envelope.Header{Fingerprint: ck.Meta.Fingerprint, KeyID: ck.Meta.KeyID}, ct)
		if err != nil {
			t.Fatal(err)
		}
		wf := f32(w)
		m := checkQuery(t, f, srv, gal, qb, func(g []float32) float64 { return cosine(wf, g) })
		if len(m) < 4 {
			t.Fatalf("%s: expected the planted matches of w, got %v", name, m)
		}
	}
}

// orthogonal returns v minus its projection on the unit vector u.
func orthogonal(v, u []float64) []float64 {
	d := dot(v, u)
	out := make([]float64, len(v))
	for i := range v {
		out[i] = v[i] - d*u[i]
	}
	return out
}

func dot(a, b []float64) float64 {
	var d float64
	for i := range a {
		d += a[i] * b[i]
	}
	return d
}
