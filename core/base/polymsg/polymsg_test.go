package polymsg

import (
	"errors"
	"testing"

	"encmatch/core/base/errs"

	"github.com/tuneinsight/lattigo/v6/ring"
)

// q is an NTT-friendly 40-bit prime (1 mod 32); the shape of a polynomial
// does not change the code paths.
const q = 0xffffee001

// TestReducedOnWrite: a coefficient left in [q, 2q) by lazy arithmetic is
// written reduced, and an unreduced one on the wire is refused, as is a
// short message.
func TestReducedOnWrite(t *testing.T) {
	a, b := ring.NewPoly(16, 0), ring.NewPoly(16, 0)
	a.Coeffs[0][0] = q + 1
	data := Append(nil, []Ref{{&a, []uint64{q}}})
	if err := Read(data, []Ref{{&b, []uint64{q}}}, "test"); err != nil || b.Coeffs[0][0] != 1 {
		t.Fatalf("read back %d (%v), want 1", b.Coeffs[0][0], err)
	}
	data[0], data[7] = 0xff, 0xff
	if err := Read(data, []Ref{{&b, []uint64{q}}}, "test"); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("unreduced coefficient: got %v, want a corrupt-data error", err)
	}
	if err := Read(data[:8], []Ref{{&b, []uint64{q}}}, "test"); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("short data: got %v, want a corrupt-data error", err)
	}
}

// FuzzRead reads the coefficients of a 16-coefficient polynomial (the
// reader behind every message of both setups).
func FuzzRead(f *testing.F) {
	a := ring.NewPoly(16, 0)
	for i := range a.Coeffs[0] {
		a.Coeffs[0][i] = uint64(i) * 0x9e3779b97f4a7c15 % q
	}
	refs := []Ref{{&a, []uint64{q}}}
	valid := Append(nil, refs)
	f.Add(valid)
	f.Add(valid[:len(valid)-8])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		b := ring.NewPoly(16, 0)
		if err := Read(data, []Ref{{&b, []uint64{q}}}, "fuzz"); err == nil {
			for _, c := range b.Coeffs[0] {
				if c >= q {
					t.Fatalf("accepted an unreduced coefficient %d", c)
				}
			}
		}
	})
}
