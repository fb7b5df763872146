package discretise

import (
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"encmatch/core/base/errs"
	"encmatch/core/iris/ccmm"
	"encmatch/core/iris/scoreslots"

	"github.com/tuneinsight/lattigo/v6/circuits/ckks/bootstrapping"
	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// TestRounding: switchDown and lift equal their definitions computed with
// big integers, on random, zero, boundary and extreme residues.
func TestRounding(t *testing.T) {
	const q0 = uint64(36028797019488257) // a 55-bit NTT prime
	const logV = 14
	v := uint64(1) << logV
	rng := rand.New(rand.NewPCG(1, 2))
	cs := []uint64{0, 1, q0 - 1, q0 / 2, q0/2 + 1, q0 / v, q0/v + 1, q0 / (2 * v), q0/(2*v) + 1}
	for range 100000 {
		cs = append(cs, rng.Uint64N(q0))
	}
	Q, V := new(big.Int).SetUint64(q0), new(big.Int).SetUint64(v)
	roundDiv := func(a, b *big.Int) *big.Int { // round(a / b), halves away from zero, for a >= 0
		n := new(big.Int).Add(new(big.Int).Mul(a, big.NewInt(2)), b)
		return n.Div(n, new(big.Int).Mul(b, big.NewInt(2)))
	}
	for _, c := range cs {
		x := new(big.Int).SetUint64(c)
		neg := c > q0/2
		if neg {
			x.Sub(Q, x)
		}
		y := roundDiv(new(big.Int).Mul(x, V), Q)
		if neg {
			y.Neg(y)
		}
		y.Mod(y, V)
		if y.Cmp(new(big.Int).Rsh(V, 1)) >= 0 {
			y.Sub(y, V)
		}
		got := switchDown(c, q0, logV)
		if got != y.Int64() {
			t.Fatalf("switchDown(%d) = %d, want %d", c, got, y.Int64())
		}
		a := new(big.Int).Abs(y)
		z := roundDiv(new(big.Int).Mul(a, Q), V)
		if y.Sign() < 0 && z.Sign() != 0 {
			z.Sub(Q, z)
		}
		if l := lift(got, q0, v, logV); l != z.Uint64() {
			t.Fatalf("lift(%d) = %d, want %d", got, l, z.Uint64())
		}
	}
}

// fixture is a discretiser at the toy rings (INSECURE) with the secret
// that decrypts its outputs.
type fixture struct {
	d      *Discretiser
	params ckks.Parameters
	sk     *rlwe.SecretKey
}

func newFixture(t *testing.T, btLit bootstrapping.ParametersLiteral, shares int) fixture {
	t.Helper()
	cp, err := ccmm.NewParams(ccmm.Literal{LogNDB: 10, LogNQ: 9, LogQ: []int{20, 20, 20}, LogK: []int{20, 20, 20}, LogScale: 18, Inner: 1024})
	if err != nil {
		t.Fatal(err)
	}
	p, err := scoreslots.NewParams(cp, scoreslots.Literal{LogN2: 12, LogQ0: 55, LogP: []int{61}, ScoreBits: 11, Levels: 14, LogLevel: 36,
		EphemeralShares: shares, Bootstrapping: btLit})
	if err != nil {
		t.Fatal(err)
	}
	sks, err := cp.GenSecrets(cp.NDB)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := p.GenKeys(sks.DB, nil)
	if err != nil {
		t.Fatal(err)
	}
	evals, err := p.NewEvaluators(keys)
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(evals[0], StartDecoding(p.Bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	other := &Decoding{done: make(chan struct{})} // made for other (zero) parameters
	close(other.done)
	if _, err := New(evals[0], other); !errors.Is(err, errs.ErrMismatch) {
		t.Fatalf("a decoding of other parameters: %v, want ErrMismatch", err)
	}
	return fixture{d: d, params: p.Bootstrap.BootstrappingParameters, sk: keys.Secret}
}

func (f fixture) encrypt(t *testing.T, vals []float64, level int) *rlwe.Ciphertext {
	t.Helper()
	pt := ckks.NewPlaintext(f.params, level)
	if err := ckks.NewEncoder(f.params).Encode(vals, pt); err != nil {
		t.Fatal(err)
	}
	ct, err := rlwe.NewEncryptor(f.params, f.sk).EncryptNew(pt)
	if err != nil {
		t.Fatal(err)
	}
	return ct
}

func (f fixture) decrypt(t *testing.T, ct *rlwe.Ciphertext) []float64 {
	t.Helper()
	out := make([]float64, f.params.MaxSlots())
	if err := ckks.NewEncoder(f.params).Decode(rlwe.NewDecryptor(f.params, f.sk).DecryptNew(ct), out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDiscretise: values 0 and 1 (with a noise-sized error), a range of
// values strictly between them, 1/2 and values just outside [0, 1], in
// ciphertexts at level 1 (bootstrapped first) and 5 (not). Integers puts
// every value within the measured bootstrap error of a multiple of
// 2^-Bits, 0 and 1 at integers within Bound of 0 and 2^Bits, every value
// at an integer Possible allows; Apply turns each slot into 0 or 1 (within
// 2^-10), the bit of its integer.
//
// Run with one holder's weight-32 ephemeral secret (2^-6 units) and with
// the sum of three parties' shares (scoreslots.IrisThreshold's, drawn by
// one holder here as scoreslots.GenEncapsulation does: 2^-7 units).
func TestDiscretise(t *testing.T) {
	t.Run("one holder", func(t *testing.T) {
		testDiscretise(t, newFixture(t, scoreslots.SparseBootstrapping([]int{61, 61}), 0), 6)
	})
	t.Run("three shares", func(t *testing.T) {
		testDiscretise(t, newFixture(t, scoreslots.CollectiveSparseBootstrapping([]int{61, 61}, 3, 32), 3), 7)
	})
}

func testDiscretise(t *testing.T, f fixture, bits int) {
	d := f.d
	t.Logf("bound %.1f units of 2^-%d, comparator kappa %d (value band %.2e), modulus 2^%d", d.Bound, d.Bits, d.Comparator.Kappa, d.Comparator.ValueBand, d.logV)
	if d.Bits != bits {
		t.Fatalf("units of 2^-%d for a rounding bound of %.1f, want 2^-%d", d.Bits, d.Bound, bits)
	}
	slots := f.params.MaxSlots()
	rng := rand.New(rand.NewPCG(3, 4))
	for _, level := range []int{1, 5} {
		vals := make([]float64, slots)
		for j := range vals {
			switch {
			case j%16 == 3:
				vals[j] = rng.Float64()
			case j%64 == 5:
				vals[j] = 0.5
			case j%64 == 7:
				vals[j] = -1e-3
			case j%64 == 9:
				vals[j] = 1 + 1e-3
			default:
				vals[j] = float64(rng.IntN(2)) + (rng.Float64()-0.5)*1e-4
			}
		}
		ct := f.encrypt(t, vals, level)
		ints, err := d.Integers(ct)
		if err != nil {
			t.Fatal(err)
		}
		got := f.decrypt(t, ints)
		unit := math.Ldexp(1, d.Bits)
		var worst, widest float64
		want := make([]bool, slots)
		for j, v := range vals {
			u := got[j] * d.width * unit
			i := math.Round(u)
			worst = math.Max(worst, math.Abs(u-i))
			widest = math.Max(widest, math.Abs(i-v*unit))
			zero, one := d.Possible(v)
			want[j] = i >= unit/2
			if want[j] && !one || !want[j] && !zero {
				t.Fatalf("level %d, slot %d: value %.6f became the integer %.0f (bit %v), which Possible excludes", level, j, v, i, want[j])
			}
		}
		t.Logf("level %d: the bootstrap's error %.2e units, the rounding's %.1f units (bound %.1f)", level, worst, widest, d.Bound)
		if worst > BootstrapError {
			t.Errorf("level %d: the bootstrap's error %.2e units exceeds the %v New allows for", level, worst, BootstrapError)
		}
		out, err := d.Apply(ct)
		if err != nil {
			t.Fatal(err)
		}
		bits := f.decrypt(t, out)
		changed := 0
		for j, b := range bits {
			w := 0.0
			if want[j] {
				w = 1
			}
			if math.Abs(b-w) > math.Ldexp(1, -10) {
				t.Fatalf("level %d, slot %d: value %.6f discretised to %.6f, its integer gives %v", level, j, vals[j], b, w)
			}
			if math.Abs(vals[j]-0.5) < 0.5 && math.Abs(vals[j]-w) > 0.5 {
				changed++
			}
		}
		t.Logf("level %d: %d slots, every output within 2^-10 of its bit; %d intermediate values went to the far bit", level, slots, changed)
	}
}

// TestNewRefusesDenseBootstrapping: without the sparse encapsulation the
// rounding error is not bounded by Bits.
func TestNewRefusesDenseBootstrapping(t *testing.T) {
	if _, err := New(&bootstrapping.Evaluator{}, nil); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("a bootstrapping without an ephemeral secret: %v, want ErrInvalid", err)
	}
}
