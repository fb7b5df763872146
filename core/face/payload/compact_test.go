package payload

import (
	"math"
	"math/rand/v2"
	"testing"

	"encmatch/core/base/params"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// TestCompactMatchesModel: the encrypted compaction of three groups (one
// partial, given out of order) decrypts to the plaintext model up to CKKS
// noise well below the decoder's tolerances (0.0045 measured here, N = 2^12),
// and decodes to the records whose bits are set.
func TestCompactMatchesModel(t *testing.T) {
	compactMatchesModel(t, params.Toy, 3)
	compactMatchesModel(t, params.ToyReal, 2) // real slots: the conjugate-invariant ring
}

// TestCompactNoiseAtTheSecureRing measures the same at N = 2^15 (skipped
// with -short): the largest error of any cell against the plaintext model,
// with payload columns encrypted under the public key (the noisier
// enroller).
func TestCompactNoiseAtTheSecureRing(t *testing.T) {
	if testing.Short() {
		t.Skip("N = 2^15 keys take a minute")
	}
	compactMatchesModel(t, params.Default, 4)
}

func compactMatchesModel(t *testing.T, preset string, groupCount int) {
	set, err := params.NewWith(preset, 8, 16, true)
	if err != nil {
		t.Fatal(err)
	}
	p := set.CKKS
	K := p.MaxSlots()
	kgen := rlwe.NewKeyGenerator(p)
	sk := kgen.GenSecretKeyNew()
	var rots []int
	for r := 1; r < K; r *= 2 {
		rots = append(rots, r)
	}
	gks := kgen.GenGaloisKeysNew(p.GaloisElements(rots), sk)
	keys := rlwe.NewMemEvaluationKeySet(kgen.GenRelinearizationKeyNew(sk), gks...)
	enc := rlwe.NewEncryptor(p, kgen.GenPublicKeyNew(sk))
	ecd := ckks.NewEncoder(p)
	dec := rlwe.NewDecryptor(p, sk)

	const width, level = 3, 1
	var spans []Span
	for g := 0; g < groupCount; g++ {
		spans = append(spans, Span{g, g * K, K})
	}
	spans[groupCount-1].Count = 700
	rng := rand.New(rand.NewPCG(9, 9))
	l, err := NewLayout(K, groupCount, width, 8)
	if err != nil {
		t.Fatal(err)
	}
	var groups []Group
	bits := make([][]float64, len(spans))
	pays := make([][]int16, len(spans))
	for i, sp := range spans {
		bits[i] = make([]float64, K)
		for _, s := range []int{rng.IntN(sp.Count), rng.IntN(sp.Count)} {
			bits[i][s] = 1
		}
		pays[i] = make([]int16, sp.Count*width)
		for k := range pays[i] {
			pays[i][k] = int16(rng.IntN(65536) - 32768)
		}
		pt := ckks.NewPlaintext(p, level)
		pt.Scale = rlwe.NewScale(ResultScale)
		if err := ecd.Encode(bits[i], pt); err != nil {
			t.Fatal(err)
		}
		b, _ := enc.EncryptNew(pt)
		g := Group{Index: sp.Index, Start: sp.Start, Count: sp.Count, Bits: b}
		for _, col := range PayloadColumns(pays[i], width, 0, K) {
			pt := ckks.NewPlaintext(p, level)
			pt.Scale = rlwe.NewScale(PayloadScale)
			if err := ecd.Encode(col, pt); err != nil {
				t.Fatal(err)
			}
			ct, _ := enc.EncryptNew(pt)
			g.Columns = append(g.Columns, ct)
		}
		groups = append(groups, g)
	}
	groups[0], groups[groupCount-1] = groups[groupCount-1], groups[0] // any order
	out, err := NewCompactor(p, keys, l).Compact(groups)
	if err != nil {
		t.Fatal(err)
	}
	want := Model(l, spans, bits, pays)
	values := make([][]float64, len(out))
	for i, ct := range out {
		values[i] = make([]float64, K)
		if err := ecd.Decode(dec.DecryptNew(ct), values[i]); err != nil {
			t.Fatal(err)
		}
	}
	// The largest error of a count cell and of a byte cell, over both copies.
	worst, worstCount := 0.0, 0.0
	for cp := 0; cp < 2; cp++ {
		for c := 0; c < l.Columns(); c++ {
			for j := 0; j < l.Cells; j++ {
				ct, s := l.Where(cp, c, j)
				e := math.Abs(values[ct][s] - want[ct][s])
				if c == 0 {
					worstCount = math.Max(worstCount, e)
				} else {
					worst = math.Max(worst, e)
				}
			}
		}
	}
	t.Logf("%s: largest difference from the model: count cells %.3g, byte cells %.3g (tolerances %g, %g)", preset, worstCount, worst, countTolerance, byteTolerance)
	if worst > byteTolerance/5 || worstCount > countTolerance/5 { // a fifth of what the decoder tolerates

		t.Fatalf("encrypted compaction differs from the model by %.3g", worst)
	}
	ans, err := Decode(l, spans, values)
	if err != nil || !ans.Complete || ans.Count != 2*groupCount || len(ans.Records) != 2*groupCount {
		t.Fatalf("decode: %+v %v", ans, err)
	}
}
