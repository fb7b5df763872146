package irisparams

import (
	"errors"
	"os"
	"strings"
	"testing"

	"encmatch/core/iris/ccmm"
	"encmatch/core/iris/fold"
)

// TestPresetSecurity: the secure presets pass every 128-bit check (the
// CCMM's database and query secrets, the residual secret at q0, the
// bootstrapping ring's uniform ternary secret; the default preset's
// ephemeral secret against its source's bound, default-dense has none,
// threshold's three parties' shares of weight 32 each against it, 96 in all) and hold the
// comparator and two product layers after a half-bootstrap; the toy
// presets fail the checks.
func TestPresetSecurity(t *testing.T) {
	for name, weight := range map[string]int{"default": 32, "default-dense": 0, "threshold": 96} {
		p, err := Build(name, 0)
		if err != nil {
			t.Fatal(err)
		}
		checks := append(p.CCMM.Security(), p.Slots.Security()...)
		for _, c := range checks {
			t.Logf("%s: %-42s N=2^%d log QP %7.1f max %4d %s ok=%v", name, c.What, c.LogN, c.LogQ, c.MaxLogQ, c.Secret, c.OK)
		}
		if err := ccmm.FailedChecks(checks); err != nil {
			t.Fatal(err)
		}
		if w := p.Slots.Bootstrap.EphemeralSecretWeight; w != weight {
			t.Fatalf("%s: ephemeral secret weight %d, want %d", name, w, weight)
		}
		if lvl := p.Slots.Bootstrap.SlotsToCoeffsParameters.LevelQ; lvl < p.Kappa+4 {
			t.Fatalf("%s: %d levels after the half-bootstrap: the comparator needs %d and the reduction's first two product layers 2 more", name, lvl, p.Kappa)
		}
	}
	for _, name := range []string{"toy", "toy-threshold"} {
		toy, err := Build(name, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := ccmm.FailedChecks(append(toy.CCMM.Security(), toy.Slots.Security()...)); !errors.Is(err, ccmm.ErrInsecure) {
			t.Fatalf("the %s preset passes the 128-bit checks: %v", name, err)
		}
	}
	if _, err := Build("nope", 0); err == nil {
		t.Fatal("an unknown preset was built")
	}
	if _, err := Build("toy", 99); err == nil {
		t.Fatal("kappa 99 accepted")
	}
}

// TestFoldPresets: the fold preset passes every 128-bit check (the
// database at Q K, the query secret, the fold keys at Q P, the
// bootstrapping's), its slot noise bound stays below 0.4 score units (0.366
// with entries up to 2^14) and its rounding bound below 0.25
// (docs/IRIS.md, "A modulus budget that closes"), the
// kappa-12 design fits it and the kappa-11 comparator refuses that
// design; toy-fold takes the same design and fails the checks.
func TestFoldPresets(t *testing.T) {
	d := kappa12Design(t)
	p := build(t, "fold", 0)
	fp, lit, err := p.DesignFold(d, 31)
	if err != nil {
		t.Fatal(err)
	}
	checks := append(append(p.CCMM.Security(), p.Slots.Security()...), fp.Security()...)
	for _, c := range checks {
		t.Logf("fold: %-42s N=2^%d log QP %7.1f max %4d %s ok=%v", c.What, c.LogN, c.LogQ, c.MaxLogQ, c.Secret, c.OK)
	}
	if err := ccmm.FailedChecks(checks); err != nil {
		t.Fatal(err)
	}
	noise, rounding := p.Encoder.NoiseBound(p.CCMM), p.Encoder.ErrorBound(float64(p.CCMM.Lit.Inner))
	t.Logf("fold: slot noise bound %.3f, rounding bound %.3f score units; %d fold groups of %d", noise, rounding, (lit.Rotations+lit.GroupSize-1)/lit.GroupSize, lit.GroupSize)
	if noise > 0.4 || rounding > 0.25 {
		t.Fatalf("slot noise bound %.3f over 0.4 or rounding bound %.3f over 0.25", noise, rounding)
	}
	if _, _, err := p.PairFold(d.Delta, 31); err != nil {
		t.Fatal(err)
	}
	if _, _, err := build(t, "fold", 11).DesignFold(d, 31); err == nil || !strings.Contains(err.Error(), "tolerance") {
		t.Fatalf("the kappa-12 design at kappa 11: %v", err)
	}
	toy := build(t, "toy-fold", 0)
	tfp, _, err := toy.DesignFold(d, 31)
	if err != nil {
		t.Fatal(err)
	}
	if err := ccmm.FailedChecks(append(toy.CCMM.Security(), tfp.Security()...)); !errors.Is(err, ccmm.ErrInsecure) {
		t.Fatalf("the toy-fold preset passes the 128-bit checks: %v", err)
	}
	def := build(t, "default", 0)
	if _, _, err := def.DesignFold(d, 31); def.Folds() || err == nil {
		t.Fatalf("the default preset folds (%v) or built a fold: %v", def.Folds(), err)
	}
}

// kappa12Design is the kappa-12 two-polynomial design of docs/IRIS.md
// (package fold's test data).
func kappa12Design(t *testing.T) *fold.Design {
	t.Helper()
	data, err := os.ReadFile("../fold/testdata/design-kappa12.json")
	if err != nil {
		t.Fatal(err)
	}
	d, err := fold.ReadDesign(data)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// build is Build for a test: a preset that must build.
func build(t *testing.T, name string, kappa int) *Params {
	t.Helper()
	p, err := Build(name, kappa)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
