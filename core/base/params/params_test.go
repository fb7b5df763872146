package params

import (
	"math"
	"testing"
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
