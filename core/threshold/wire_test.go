package threshold

import (
	"errors"
	"testing"

	"encmatch/core/errs"
	"encmatch/core/params"
)

// TestPolysReducedOnWrite: a coefficient left in [q, 2q) by lazy arithmetic
// is written reduced, and an unreduced one on the wire is refused.
func TestPolysReducedOnWrite(t *testing.T) {
	set, err := params.New(params.Toy, params.MinKappa, 4)
	if err != nil {
		t.Fatal(err)
	}
	p := *set.CKKS.GetRLWEParameters()
	a := p.RingQ().AtLevel(0).NewPoly()
	q := p.Q()[0]
	a.Coeffs[0][0] = q + 1
	b := p.RingQ().AtLevel(0).NewPoly()
	data := appendPolys(nil, qRefs(p, &a))
	if err := readPolys(data, qRefs(p, &b), "test"); err != nil || b.Coeffs[0][0] != 1 {
		t.Fatalf("read back %d (%v), want 1", b.Coeffs[0][0], err)
	}
	data[0], data[7] = 0xff, 0xff
	if err := readPolys(data, qRefs(p, &b), "test"); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("unreduced coefficient: got %v, want a corrupt-data error", err)
	}
	if err := readPolys(data[:8], qRefs(p, &b), "test"); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("short data: got %v, want a corrupt-data error", err)
	}
}
