package irismatch

import (
	"math"
	"math/rand/v2"
	"testing"

	"encmatch/core/base/comparator"
	"encmatch/core/iris/ccmm"
	"encmatch/core/iris/scoreslots"
)

// irisSecure is the iris preset's bootstrap: ccmm.IrisBootstrap into
// scoreslots.IrisSecure.
func irisSecure(tb testing.TB) *scoreslots.Params {
	tb.Helper()
	cp, err := ccmm.NewParams(ccmm.IrisBootstrap)
	if err != nil {
		tb.Fatal(err)
	}
	p, err := scoreslots.NewParams(cp, scoreslots.IrisSecure)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// TestBundleModel checks the bundle's threshold test on its plaintext
// model (the comparator's Model at the bundle's input 2x = (s - 1/2) /
// Size) at the levels of the iris preset's bootstrap (built from
// ccmm.IrisBootstrap and scoreslots.IrisSecure) and of the toy's: for
// every bundle size from minBundle to Size, the worst cases (every value
// LeafError above 0, or one value LeafError below 1 and the others
// LeafError below 0, each with the bootstrap's error LeafError against
// the answer) and 20,000 random bundles of values within LeafError of 0
// or 1 give the exact OR within comparator.ValueTolerance, and the input
// stays inside the comparator's [-1, 1].
func TestBundleModel(t *testing.T) {
	iris := irisSecure(t)
	tc := newToy(t)
	levels := map[string]int{
		"iris": iris.Bootstrap.ResidualParameters.MaxLevel(),
		"toy":  tc.slots.Bootstrap.ResidualParameters.MaxLevel(),
	}
	want := map[string][2]int{"iris": {16, 11}} // size, kappa (docs/IRIS.md)
	rng := rand.New(rand.NewPCG(11, 12))
	for name, l := range levels {
		b, err := newBundler(l)
		if err != nil {
			t.Fatal(err)
		}
		if b == nil {
			t.Fatalf("%s: no bundle fits %d levels", name, l)
		}
		t.Logf("%s: %d levels after a bootstrap: bundles of up to %d at kappa %d (value band %.4f)", name, l, b.Size, b.cmp.Kappa, b.cmp.ValueBand)
		if w, ok := want[name]; ok && (b.Size != w[0] || b.cmp.Kappa != w[1]) {
			t.Errorf("%s: bundles of %d at kappa %d, want %d at kappa %d", name, b.Size, b.cmp.Kappa, w[0], w[1])
		}
		if b.cmp.Kappa > l-2 {
			t.Errorf("%s: kappa %d leaves fewer than 2 of %d levels", name, b.cmp.Kappa, l)
		}
		size := float64(b.Size)
		decide := func(vals []float64, bootErr float64) float64 {
			s := 0.0
			for _, v := range vals {
				s += v
			}
			x2 := (s-0.5)/size + bootErr
			if math.Abs(x2) > 1 {
				t.Fatalf("%s: bundle input %v outside [-1, 1]", name, x2)
			}
			return b.cmp.Model(x2)
		}
		for n := minBundle; n <= b.Size; n++ {
			none := make([]float64, n)
			one := make([]float64, n)
			for i := range none {
				none[i], one[i] = LeafError, -LeafError
			}
			one[n-1] = 1 - LeafError
			if v := decide(none, LeafError); v > comparator.ValueTolerance {
				t.Errorf("%s, %d values near 0: %v", name, n, v)
			}
			if v := decide(one, -LeafError); v < 1-comparator.ValueTolerance {
				t.Errorf("%s, %d values, one near 1: %v", name, n, v)
			}
			all := make([]float64, n)
			for i := range all {
				all[i] = 1 + LeafError
			}
			if v := decide(all, LeafError); v < 1-comparator.ValueTolerance {
				t.Errorf("%s, %d values all near 1: %v", name, n, v)
			}
		}
		for range 20000 {
			n := minBundle + rng.IntN(b.Size-minBundle+1)
			vals := make([]float64, n)
			or := 0.0
			for i := range vals {
				if rng.IntN(3*n) == 0 {
					vals[i], or = 1, 1
				}
				vals[i] += (2*rng.Float64() - 1) * LeafError
			}
			if v := decide(vals, (2*rng.Float64()-1)*LeafError); math.Abs(v-or) > comparator.ValueTolerance {
				t.Fatalf("%s: bundle %v gave %v, want %v", name, vals, v, or)
			}
		}
	}
}
