package ccmm

import (
	"bytes"
	"errors"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"

	"encmatch/core/base/errs"
)

// smallSharedA is a valid 2-prime encrypted matrix in ring 2^4 (the fuzz
// seed: small enough for millions of executions).
func smallSharedA() *SharedA {
	rng := rand.New(rand.NewPCG(1, 2))
	c := &SharedA{LogN: 4, Rows: 32, Cols: 3, Moduli: []uint64{97, 193}, Scale: big.NewInt(1 << 20)}
	for _, q := range c.Moduli {
		a, b := NewMat(16, 3), NewMat(32, 3)
		for _, m := range []Mat{a, b} {
			for i := range m.Data {
				m.Data[i] = center(rng.Uint64N(q), q)
			}
		}
		c.A, c.B = append(c.A, a), append(c.B, b)
	}
	return c
}

// TestSharedARoundTrip: WriteTo then ReadSharedA gives the same matrix;
// a wrong expected shape is a mismatch, every truncation corrupt.
func TestSharedARoundTrip(t *testing.T) {
	c := smallSharedA()
	var buf bytes.Buffer
	if n, err := c.WriteTo(&buf); err != nil || n != c.EncodedSize() {
		t.Fatalf("wrote %d bytes (%v), EncodedSize %d", n, err, c.EncodedSize())
	}
	got, err := ReadSharedA(bytes.NewReader(buf.Bytes()), int64(buf.Len()), &SharedA{LogN: 4, Cols: 3, Moduli: c.Moduli, Scale: c.Scale})
	if err != nil {
		t.Fatal(err)
	}
	for i := range c.Moduli {
		if !slices.Equal(got.A[i].Data, c.A[i].Data) || !slices.Equal(got.B[i].Data, c.B[i].Data) {
			t.Fatalf("prime %d differs after the round trip", i)
		}
	}
	if _, err := ReadSharedA(bytes.NewReader(buf.Bytes()), int64(buf.Len()), &SharedA{LogN: 4, Cols: 4, Moduli: c.Moduli, Scale: c.Scale}); !errors.Is(err, errs.ErrMismatch) {
		t.Fatalf("another shape: %v, want a mismatch", err)
	}
	for _, cut := range []int{0, 5, 30, buf.Len() - 1} {
		if _, err := ReadSharedA(bytes.NewReader(buf.Bytes()[:cut]), int64(cut), nil); !errors.Is(err, errs.ErrCorrupt) {
			t.Fatalf("truncated to %d bytes: %v, want corrupt", cut, err)
		}
	}
}

// FuzzReadSharedA: no input makes the decoder panic or allocate past the
// input's length; whatever it accepts is centered and round-trips.
func FuzzReadSharedA(f *testing.F) {
	var buf bytes.Buffer
	_, _ = smallSharedA().WriteTo(&buf)
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ReadSharedA(bytes.NewReader(b), int64(len(b)), nil)
		if err != nil {
			if !errors.Is(err, errs.ErrCorrupt) {
				t.Fatalf("error of another kind: %v", err)
			}
			return
		}
		var out bytes.Buffer
		if _, err := c.WriteTo(&out); err != nil || !bytes.Equal(out.Bytes(), b) {
			t.Fatalf("accepted bytes do not round-trip (%v)", err)
		}
	})
}
