package engine

import (
	"math"
	"math/rand/v2"
	"testing"

	"encmatch/core/base/params"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// TestGiantSumMatchesRelinRotate checks giantSum against Lattigo's
// relinearisation, rotation and addition of each giant step, and both
// against the plaintext: sum_j Rot_{r_j}(a_j * b_j) for random slots, with
// rotation 0 among the giant steps and two workers' sums merged. The
// lazy sum rounds once where the reference rounds at every key switch, so
// it must be at least as close to the plaintext (within a factor for the
// randomness of the noise) and the two must agree to well below the
// comparator's tolerance. (At the products' scale Delta^2, before the
// rescale, the key switches' roundings are far below what the decoded
// values resolve: the difference printed is usually 0.)
func TestGiantSumMatchesRelinRotate(t *testing.T) {
	set, err := params.New(params.Toy, params.MinKappa, 64)
	if err != nil {
		t.Fatal(err)
	}
	p := set.CKKS
	rotations := []int{0, 64, 128, 192}
	kgen := rlwe.NewKeyGenerator(p)
	sk := kgen.GenSecretKeyNew()
	gks := kgen.GenGaloisKeysNew(p.GaloisElements(rotations[1:]), sk)
	eval := ckks.NewEvaluator(p, rlwe.NewMemEvaluationKeySet(kgen.GenRelinearizationKeyNew(sk), gks...))
	enc, dec, ecd := rlwe.NewEncryptor(p, sk), rlwe.NewDecryptor(p, sk), ckks.NewEncoder(p)
	level, slots := p.MaxLevel(), p.MaxSlots()
	rng := rand.New(rand.NewPCG(3, 4))
	encrypt := func(v []float64) *rlwe.Ciphertext {
		pt := ckks.NewPlaintext(p, level)
		if err := ecd.Encode(v, pt); err != nil {
			t.Fatal(err)
		}
		ct, err := enc.EncryptNew(pt)
		if err != nil {
			t.Fatal(err)
		}
		return ct
	}
	want := make([]float64, slots)
	ref := ckks.NewCiphertext(p, 1, level)
	var halves [2]*giantSum
	for w := range halves {
		if halves[w], err = newGiantSum(p, eval, level); err != nil {
			t.Fatal(err)
		}
	}
	for j, r := range rotations {
		a, b := make([]float64, slots), make([]float64, slots)
		for i := range a {
			a[i], b[i] = 2*rng.Float64()-1, 2*rng.Float64()-1
		}
		for i := range want {
			k := (i + r) % slots
			want[i] += a[k] * b[k]
		}
		prod, err := eval.MulNew(encrypt(a), encrypt(b)) // degree 2, not relinearised
		if err != nil {
			t.Fatal(err)
		}
		if err := halves[j%2].add(prod, r); err != nil {
			t.Fatal(err)
		}
		step := ckks.NewCiphertext(p, 1, level)
		if err := eval.Relinearize(prod, step); err != nil {
			t.Fatal(err)
		}
		if err := eval.Rotate(step, r, step); err != nil {
			t.Fatal(err)
		}
		if j == 0 {
			ref.Copy(step)
		} else if err := eval.Add(ref, step, ref); err != nil {
			t.Fatal(err)
		}
	}
	halves[0].merge(halves[1])
	got := halves[0].finish(ref.MetaData)
	decode := func(ct *rlwe.Ciphertext) []float64 {
		out := make([]float64, slots)
		if err := ecd.Decode(dec.DecryptNew(ct), out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	g, r := decode(got), decode(ref)
	var errGot, errRef, diff float64
	for i := range want {
		errGot = math.Max(errGot, math.Abs(g[i]-want[i]))
		errRef = math.Max(errRef, math.Abs(r[i]-want[i]))
		diff = math.Max(diff, math.Abs(g[i]-r[i]))
	}
	t.Logf("max error: lazy giant sum %.3g, relinearise-rotate-add %.3g; difference %.3g", errGot, errRef, diff)
	if errGot > 2*errRef || diff > 1e-6 {
		t.Fatalf("lazy giant sum error %.3g (reference %.3g, difference %.3g)", errGot, errRef, diff)
	}
}
