package seeded

import (
	"math"
	"testing"

	"encmatch/core/base/params"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

func toy(t testing.TB) ckks.Parameters {
	t.Helper()
	set, err := params.New(params.Toy, params.MinKappa, 4)
	if err != nil {
		t.Fatal(err)
	}
	return set.CKKS
}

func TestEncryptDecryptsAndRegenerates(t *testing.T) {
	p := toy(t)
	sk := rlwe.NewKeyGenerator(p).GenSecretKeyNew()
	ecd := ckks.NewEncoder(p)
	dec := rlwe.NewDecryptor(p, sk)
	enc := NewEncryptor(p, sk)
	seed, err := NewSeed()
	if err != nil {
		t.Fatal(err)
	}
	msg := make([]float64, p.MaxSlots())
	for i := range msg {
		msg[i] = math.Sin(float64(i)) * 0.9
	}
	pt := ckks.NewPlaintext(p, p.MaxLevel())
	if err := ecd.Encode(msg, pt); err != nil {
		t.Fatal(err)
	}
	for index := uint64(0); index < 3; index++ {
		ct, err := enc.Encrypt(pt, seed, index)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]float64, p.MaxSlots())
		if err := ecd.Decode(dec.DecryptNew(ct), got); err != nil {
			t.Fatal(err)
		}
		for i := range msg {
			if math.Abs(got[i]-msg[i]) > 1e-6 {
				t.Fatalf("index %d slot %d: decrypted %v, encrypted %v", index, i, got[i], msg[i])
			}
		}
		mask := p.RingQ().NewPoly()
		Mask(p.RingQ(), seed, index, mask)
		if !mask.Equal(&ct.Value[1]) {
			t.Fatalf("index %d: Mask does not regenerate c1", index)
		}
	}
}

func TestMasksDifferPerSeedAndIndex(t *testing.T) {
	p := toy(t)
	rq := p.RingQ()
	s1, _ := NewSeed()
	s2, _ := NewSeed()
	a, b, c := rq.NewPoly(), rq.NewPoly(), rq.NewPoly()
	Mask(rq, s1, 7, a)
	Mask(rq, s1, 8, b)
	Mask(rq, s2, 7, c)
	if a.Equal(&b) || a.Equal(&c) {
		t.Fatal("masks repeat across indices or seeds")
	}
	again := rq.NewPoly()
	Mask(rq, s1, 7, again)
	if !a.Equal(&again) {
		t.Fatal("Mask is not deterministic")
	}
	q := p.Q()
	for i, row := range a.Coeffs {
		for _, v := range row {
			if v >= q[i] {
				t.Fatalf("coefficient %d >= q_%d", v, i)
			}
		}
	}
}

func TestEncryptRefusesCoefficientDomainPlaintext(t *testing.T) {
	p := toy(t)
	sk := rlwe.NewKeyGenerator(p).GenSecretKeyNew()
	pt := ckks.NewPlaintext(p, p.MaxLevel())
	pt.IsNTT = false
	if _, err := NewEncryptor(p, sk).Encrypt(pt, Seed{}, 0); err == nil {
		t.Fatal("a coefficient-domain plaintext was accepted")
	}
}

// BenchmarkMask is the server's cost of regenerating one uniform half at the
// default parameters (N = 2^15, kappa 8: ten primes).
func BenchmarkMask(b *testing.B) {
	set, err := params.New(params.Default, 8, 512)
	if err != nil {
		b.Fatal(err)
	}
	rq := set.CKKS.RingQ()
	out := rq.NewPoly()
	seed, _ := NewSeed()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		Mask(rq, seed, uint64(i), out)
	}
}

// TestEncryptSum: re-encrypting a ciphertext (whole, from the public key)
// plus a plaintext under a fresh seed decrypts to the sum; its c1 is the
// fresh seed's mask; a mismatched level is refused.
func TestEncryptSum(t *testing.T) {
	p := toy(t)
	kg := rlwe.NewKeyGenerator(p)
	sk, pk := kg.GenKeyPairNew()
	ecd := ckks.NewEncoder(p)
	dec := rlwe.NewDecryptor(p, sk)
	enc := NewEncryptor(p, sk)
	a, b := make([]float64, p.MaxSlots()), make([]float64, p.MaxSlots())
	for i := range a {
		a[i], b[i] = math.Sin(float64(i))*0.5, math.Cos(float64(i))*0.4
	}
	ptA, ptB := ckks.NewPlaintext(p, p.MaxLevel()), ckks.NewPlaintext(p, p.MaxLevel())
	if err := ecd.Encode(a, ptA); err != nil {
		t.Fatal(err)
	}
	if err := ecd.Encode(b, ptB); err != nil {
		t.Fatal(err)
	}
	old, err := rlwe.NewEncryptor(p, pk).EncryptNew(ptA)
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := NewSeed()
	ct, err := enc.EncryptSum(old.CopyNew(), ptB, seed, 5)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float64, p.MaxSlots())
	if err := ecd.Decode(dec.DecryptNew(ct), got); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if math.Abs(got[i]-a[i]-b[i]) > 1e-6 {
			t.Fatalf("slot %d: %v, want %v", i, got[i], a[i]+b[i])
		}
	}
	mask := p.RingQ().NewPoly()
	Mask(p.RingQ(), seed, 5, mask)
	if !mask.Equal(&ct.Value[1]) {
		t.Fatal("c1 is not the fresh seed's mask")
	}
	low := ckks.NewPlaintext(p, p.MaxLevel()-1)
	if _, err := enc.EncryptSum(old, low, seed, 6); err == nil {
		t.Fatal("a plaintext at another level was accepted")
	}
}
