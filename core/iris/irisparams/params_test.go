package irisparams

import (
	"errors"
	"testing"

	"encmatch/core/iris/ccmm"
)

// TestPresetSecurity: the secure presets pass every 128-bit check (the
// CCMM's database and query secrets, the residual secret at q0, the
// bootstrapping ring's uniform ternary secret; the default preset's
// ephemeral secret against its source's bound, default-dense has none) and
// hold the comparator and two product layers after a half-bootstrap; the
// toy preset fails the checks.
func TestPresetSecurity(t *testing.T) {
	for name, weight := range map[string]int{"default": 32, "default-dense": 0} {
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
	toy, err := Build("toy", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := ccmm.FailedChecks(append(toy.CCMM.Security(), toy.Slots.Security()...)); !errors.Is(err, ccmm.ErrInsecure) {
		t.Fatalf("the toy preset passes the 128-bit checks: %v", err)
	}
	if _, err := Build("nope", 0); err == nil {
		t.Fatal("an unknown preset was built")
	}
	if _, err := Build("toy", 99); err == nil {
		t.Fatal("kappa 99 accepted")
	}
}
