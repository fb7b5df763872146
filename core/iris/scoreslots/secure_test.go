package scoreslots

import (
	"math"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"encmatch/core/iris/ccmm"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// TestHalfBootstrapSecureRings measures one half-bootstrap at the rings of
// the iris pipeline: database ring 2^14 with a three-prime Q (the ratio
// fix), bootstrapping ring 2^16 (4 result ciphertexts per bootstrap), 11
// residual levels for the normalisation and a kappa-10 comparator.
// The inputs are coefficient-encoded random scores encrypted at q0 under a
// database secret (the CCMM itself is measured in package ccmm). Slow
// (minutes) and large: every key is generated and held in memory, more
// than 24 GB at today's preset (killed at 24.4 GB RSS on the 24 GB
// development machine, 2026-11-26; `encmatch iris bench --preset default`
// measures the same step with the keys on disk). Only with
// ENCMATCH_CCMM_SLOW=1.
//
// Run for IrisSecure and for IrisThreshold (the ephemeral secret of three
// parties' shares, drawn here by one holder as GenEncapsulation does for
// such parameters), one after the other.
func TestHalfBootstrapSecureRings(t *testing.T) {
	if testing.Short() || os.Getenv("ENCMATCH_CCMM_SLOW") != "1" {
		t.Skip("slow test at the iris rings: set ENCMATCH_CCMM_SLOW=1 to run it")
	}
	t.Run("IrisSecure", func(t *testing.T) { testHalfBootstrapSecureRings(t, IrisSecure) })
	t.Run("IrisThreshold", func(t *testing.T) { testHalfBootstrapSecureRings(t, IrisThreshold) })
}

func testHalfBootstrapSecureRings(t *testing.T, half Literal) {
	lit := ccmm.IrisBootstrap
	cp, err := ccmm.NewParams(lit)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	p, err := NewParams(cp, half)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range append(cp.Security(), p.Security()...) {
		t.Logf("security: %-42s N=2^%d log QP=%7.1f max %4d secret %-32s ok=%v", c.What, c.LogN, c.LogQ, c.MaxLogQ, c.Secret, c.OK)
	}
	sk := ccmm.GenKeys(cp.DB, 1)[0]
	keys, err := p.GenKeys([]*rlwe.SecretKey{sk}, nil)
	if err != nil {
		t.Fatal(err)
	}
	evals, err := p.NewEvaluators(keys)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("parameters and keys: %.1f s", time.Since(start).Seconds())

	resSK, err := p.CCMM.SecretAs(sk, p.Residual)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	n1 := p.Residual.N()
	pack := 1 << (p.Lit.LogN2 - lit.LogNDB)
	want := make([][]float64, pack)
	var cts []*rlwe.Ciphertext
	scale := math.Ldexp(1, int(math.Log2(float64(p.Residual.Q()[0])))-int(p.LogRatio())) // as Lift labels it
	for u := range want {
		pt := ckks.NewPlaintext(p.Residual, 0)
		pt.IsNTT = false
		pt.Scale = rlwe.NewScale(scale)
		want[u] = make([]float64, n1)
		q0 := p.Residual.Q()[0]
		for k := range want[u] {
			s := float64(rng.IntN(1<<15) - 1<<14) // scores in [-2^14, 2^14)
			want[u][k] = s / (1 << 14)
			v := int64(math.Round(want[u][k] * scale))
			pt.Value.Coeffs[0][k] = uint64((v%int64(q0) + int64(q0)) % int64(q0))
		}
		p.Residual.RingQ().AtLevel(0).NTT(pt.Value, pt.Value)
		pt.IsNTT = true
		ct, err := rlwe.NewEncryptor(p.Residual, resSK).EncryptNew(pt)
		if err != nil {
			t.Fatal(err)
		}
		cts = append(cts, ct)
	}
	start = time.Now()
	sets, err := p.ToSlots(evals[:1], [][]*rlwe.Ciphertext{cts})
	if err != nil {
		t.Fatal(err)
	}
	slots := sets[0]
	t.Logf("half-bootstrap of %d result ciphertexts (2^%d scores): %.1f s, output level %d", pack, p.Lit.LogN2, time.Since(start).Seconds(), slots[0].Level())
	params := p.Bootstrap.BootstrappingParameters
	dec, enc := rlwe.NewDecryptor(params, keys.Secret), ckks.NewEncoder(params)
	worst := 0.0
	for s, ct := range slots {
		vals := make([]float64, ct.Slots())
		if err := enc.Decode(dec.DecryptNew(ct), vals); err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			col, row := p.SlotOf(s, i)
			worst = math.Max(worst, math.Abs(v-want[col][row]))
		}
	}
	t.Logf("largest slot error %.3g score units (2^%.1f)", worst*(1<<14), math.Log2(worst*(1<<14)))
	// 4 score units is 4e-4 of a normalised score at an overlap of 10^4
	// positions, ten times below the narrowest comparator band (kappa 13).
	if worst*(1<<14) > 4 {
		t.Fatalf("slots off by %.3g score units", worst*(1<<14))
	}
}
