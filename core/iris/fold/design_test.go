package fold

import (
	"errors"
	"os"
	"strings"
	"testing"

	"encmatch/core/base/errs"
	"encmatch/core/iris/ccmm"
	"encmatch/core/iris/slotdb"
)

// readTestDesign reads a design of testdata (python's `encmatch iris fold
// -o` designs of bench-results/iris-fold-design).
func readTestDesign(t *testing.T, name string) (*Design, []byte) {
	t.Helper()
	data, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	d, err := ReadDesign(data)
	if err != nil {
		t.Fatal(err)
	}
	return d, data
}

// TestReadDesign reads the kappa-12 design, bare and inside a report,
// turns it into a fold that the iris budget holds, and refuses designs
// with a missing part of h, a threshold outside its range, no k, a
// non-finite number or broken JSON.
func TestReadDesign(t *testing.T) {
	d, data := readTestDesign(t, "design-kappa12.json")
	if d.K != 16 || len(d.Chebyshev) != 16 || len(d.MaybeCheby) != 32 || d.SureAt < 26 || d.Tolerance != 7.2 {
		t.Fatalf("read k %d, %d and %d coefficients, sure_at %v, tolerance %v", d.K, len(d.Chebyshev), len(d.MaybeCheby), d.SureAt, d.Tolerance)
	}
	if r, tol := d.MaybeRangeAndTolerance(); tol != 0.29 || r[1] < 32 {
		t.Fatalf("maybe range %v, tolerance %v", r, tol)
	}
	wrapped, err := ReadDesign([]byte(`{"design": ` + string(data) + `, "eyes": {}}`))
	if err != nil || wrapped.SureAt != d.SureAt {
		t.Fatalf("a report holding the design: %v", err)
	}
	lit := d.Literal()
	if lit.Maybe == nil || lit.Depth() != 5 {
		t.Fatalf("the design's fold has h %v and depth %d, want h and 5", lit.Maybe != nil, lit.Depth())
	}
	cp, err := ccmm.NewParams(irisBudget(lit.Depth()))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := slotdb.NewEncoder(14, 17)
	if err != nil {
		t.Fatal(err)
	}
	lit.LogP, lit.LogScale, lit.GroupSize, lit.LogMessageRatio = []int{61, 61}, 29, d.K, toyMessageRatio
	if _, err := NewParams(cp, enc, lit); err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(string) string{
		"no maybe_range": func(s string) string { return strings.Replace(s, `"maybe_range"`, `"maybe_range_"`, 1) },
		"sure_at out":    func(s string) string { return strings.Replace(s, `"sure_at": 26.`, `"sure_at": 2600.`, 1) },
		"k 0":            func(s string) string { return strings.Replace(s, `"k": 16`, `"k": 0`, 1) },
		"NaN":            func(s string) string { return strings.Replace(s, `"top": 60.`, `"top": NaN, "x": 60.`, 1) },
		"truncated":      func(s string) string { return s[:len(s)/2] },
	} {
		bad := edit(string(data))
		if bad == string(data) {
			t.Fatalf("%s: the edit did not apply", name)
		}
		if _, err := ReadDesign([]byte(bad)); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("%s: %v, want an invalid-argument error", name, err)
		}
	}
}

// FuzzReadDesign: any bytes give a checked design or an invalid-argument
// error, never a panic; an accepted design's fold literal has its
// polynomials and a positive bound.
func FuzzReadDesign(f *testing.F) {
	for _, name := range []string{"design-kappa12.json", "design-two-h31.json"} {
		data, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"design": {"k": 1}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := ReadDesign(data)
		if err != nil {
			if !errors.Is(err, errs.ErrInvalid) {
				t.Fatalf("error %v is not an invalid-argument error", err)
			}
			return
		}
		lit := d.Literal()
		if len(lit.Poly.Chebyshev) < 2 || !(lit.Top >= 0) || (lit.Maybe != nil && len(lit.Maybe.Chebyshev) < 2) {
			t.Fatalf("accepted design gives the fold %+v", lit)
		}
	})
}
