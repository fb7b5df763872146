package params

import (
	"math"
	"math/big"
	stdbits "math/bits"
	"testing"

	"github.com/tuneinsight/lattigo/v6/ring"
)

func TestDefaultIsSecureForEverySupportedKappa(t *testing.T) {
	for k := MinKappa; k <= MaxKappa; k++ {
		s, err := New(Default, k, 512)
		if err != nil {
			t.Fatalf("kappa=%d: %v", k, err)
		}
		if s.SecurityBits() != 128 || s.Insecure {
			t.Fatalf("kappa=%d: logQP=%.1f not 128-bit", k, s.CKKS.LogQP())
		}
		if s.Slots() != 16384 || s.CKKS.MaxLevel() != 1+k {
			t.Fatalf("kappa=%d: slots=%d levels=%d", k, s.Slots(), s.CKKS.MaxLevel())
		}
	}
}

func TestToyIsMarkedInsecure(t *testing.T) {
	s, err := New(Toy, 8, 16)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Insecure || s.SecurityBits() != 0 {
		t.Fatal("toy preset must be insecure")
	}
	if want := "INSECURE"; !contains(s.Label(), want) {
		t.Fatalf("label %q lacks %q", s.Label(), want)
	}
}

func TestRejectsBadInput(t *testing.T) {
	cases := []struct {
		preset     string
		kappa, dim int
	}{{"nope", 10, 16}, {Default, 3, 16}, {Default, 40, 16}, {Default, 10, 0}, {Toy, 10, 4096}}
	for _, c := range cases {
		if _, err := New(c.preset, c.kappa, c.dim); err == nil {
			t.Errorf("New(%q,%d,%d) accepted", c.preset, c.kappa, c.dim)
		}
	}
}

func TestFingerprintSeparatesSets(t *testing.T) {
	a, _ := New(Toy, 8, 16)
	b, _ := New(Toy, 8, 32)
	c, _ := New(Toy, 10, 16)
	d, _ := New(Toy, 8, 16)
	if a.Fingerprint() == b.Fingerprint() || a.Fingerprint() == c.Fingerprint() || a.Fingerprint() != d.Fingerprint() {
		t.Fatal("fingerprints do not identify parameter sets")
	}
	for _, c := range []struct{ dim, want int }{{1, 1}, {192, 256}, {512, 512}, {1<<62 + 1, 1 << 62}, {math.MaxInt, 1 << 62}} {
		if got := PaddedDim(c.dim); got != c.want {
			t.Fatalf("PaddedDim(%d) = %d, want %d (no endless loop near 2^63)", c.dim, got, c.want)
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// TestPayloadLevelStaysSecure: every kappa with the payload level has one
// more level than without, the same number of special primes, and log2(QP)
// within the HE standard's bound for N = 2^15; the fingerprint differs from
// the set without it, which keeps its own.
func TestPayloadLevelStaysSecure(t *testing.T) {
	for k := MinKappa; k <= MaxKappa; k++ {
		plain, err := New(Default, k, 128)
		if err != nil {
			t.Fatal(err)
		}
		s, err := NewWith(Default, k, 128, true)
		if err != nil {
			t.Fatalf("kappa=%d: %v", k, err)
		}
		if s.SecurityBits() != 128 || s.CKKS.LogQP() > float64(MaxLogQPFor128[15]) {
			t.Fatalf("kappa=%d: logQP=%.1f not 128-bit", k, s.CKKS.LogQP())
		}
		if s.CKKS.MaxLevel() != plain.CKKS.MaxLevel()+1 || s.CKKS.PCount() != plain.CKKS.PCount() {
			t.Fatalf("kappa=%d: levels %d (plain %d), special primes %d (plain %d)", k, s.CKKS.MaxLevel(), plain.CKKS.MaxLevel(), s.CKKS.PCount(), plain.CKKS.PCount())
		}
		for _, b := range s.CKKS.LogPi() {
			if b < MinSpecialPrimeBits {
				t.Fatalf("kappa=%d: special prime of %d bits", k, b)
			}
		}
		if s.Fingerprint() == plain.Fingerprint() || !s.Describe().Payload {
			t.Fatalf("kappa=%d: payload set not told apart", k)
		}
		t.Logf("kappa=%d payload: log2(QP)=%.1f, special primes %v", k, s.CKKS.LogQP(), s.CKKS.LogPi())
	}
	// The set without payloads keeps the fingerprint it had before payloads existed.
	d, _ := New(Default, 13, 512)
	if d.CKKS.LogQP() > 841 || d.CKKS.PCount() != 3 {
		t.Fatalf("default chain changed: logQP %.1f, %d special primes", d.CKKS.LogQP(), d.CKKS.PCount())
	}
}

// TestModuliBelowKeepUniformDraws: every prime of a new set's Q lies just
// below its power of two (so Lattigo's uniform sampler, which masks a draw
// to the prime's bit length and rejects it when >= q, keeps at least
// 1 - 2^-16 of its draws), the primes are distinct and NTT-friendly, and the
// secure presets stay within the 128-bit bound.
func TestModuliBelowKeepUniformDraws(t *testing.T) {
	for _, preset := range Presets {
		for _, payload := range []bool{false, true} {
			s, err := NewWith(preset, DefaultKappa, 512, payload)
			if err != nil {
				t.Fatal(err)
			}
			if s.Moduli != ModuliBelow || s.Describe().Moduli != "below" {
				t.Fatalf("%s: moduli %v, want below by default", s.Label(), s.Moduli)
			}
			nthRoot := uint64(2) << s.CKKS.LogN()
			if s.CKKS.RingType() == ring.ConjugateInvariant {
				nthRoot <<= 1
			}
			seen := map[uint64]bool{}
			for i, q := range s.CKKS.Q() {
				bits := uint(64 - stdbits.LeadingZeros64(q))
				if accept := float64(q) / math.Exp2(float64(bits)); accept < 1-math.Exp2(-16) {
					t.Errorf("%s: q%d = %#x keeps only %.6f of the sampler's draws", s.Label(), i, q, accept)
				}
				if seen[q] || (q-1)%nthRoot != 0 || !big.NewInt(0).SetUint64(q).ProbablyPrime(20) {
					t.Errorf("%s: q%d = %#x is repeated, not prime or not 1 mod %d", s.Label(), i, q, nthRoot)
				}
				seen[q] = true
			}
			if !s.Insecure && s.SecurityBits() < 128 {
				t.Errorf("%s: log2(QP) %.1f above the 128-bit bound", s.Label(), s.CKKS.LogQP())
			}
		}
	}
}

// TestLegacyModuliKeepTheirFingerprints pins the fingerprints of sets built
// with the primes chosen before 2026-11-29 (ModuliAlternating), measured on
// the code before the change: key sets and indexes made then name them.
func TestLegacyModuliKeepTheirFingerprints(t *testing.T) {
	for _, c := range []struct {
		preset        string
		kappa, dim    int
		payload, fold bool
		want          string
	}{
		{Default, 13, 512, false, true, "6cd3615192187bcac6275bde548d783d"},
		{Default, 13, 512, false, false, "73bb308227fd0a71e2906b5e1c22056d"},
		{Default, 13, 512, true, true, "9b19400b7c84d622ad7747fb13199208"},
		{Toy, 7, 8, false, false, "a247bf2e9ab6b4a07849c68a006b348f"},
		{Real, 13, 512, false, false, "aa3d65f8157f228d7a7ef170a2227d67"},
	} {
		s, err := NewWithModuli(c.preset, c.kappa, c.dim, c.payload, ModuliAlternating)
		if err == nil {
			s, err = s.WithFold(c.fold)
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Fingerprint(); got != c.want || s.Describe().Moduli != "alternating" {
			t.Errorf("%s: legacy fingerprint %s (moduli %s), want %s", s.Label(), got, s.Describe().Moduli, c.want)
		}
		now, err := NewWith(c.preset, c.kappa, c.dim, c.payload)
		if err == nil {
			now, err = now.WithFold(c.fold)
		}
		if err != nil {
			t.Fatal(err)
		}
		if now.Fingerprint() == c.want {
			t.Errorf("%s: the default moduli give the legacy fingerprint", now.Label())
		}
	}
	if _, err := NewWithModuli(Default, 13, 512, false, Moduli(7)); err == nil {
		t.Error("an unknown choice of moduli was accepted")
	}
}
