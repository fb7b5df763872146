// Package codec decodes Lattigo ciphertexts and keys from untrusted bytes
// (keys: keys.go).
//
// Lattigo's decoders allocate whatever the length fields inside the bytes
// ask for, so a crafted query could make a server allocate terabytes and die.
// DecodeCiphertext therefore first checks that the bytes have exactly the
// layout of a ciphertext of the expected shape (total size and every length
// field), decodes into a preallocated ciphertext, and then checks the
// metadata and that every coefficient is reduced modulo its prime.
package codec

import (
	"encoding/binary"
	"fmt"
	"math"

	"encmatch/core/base/errs"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// DecodeCiphertext decodes a ciphertext of the given degree and level under
// parameters p; what names it in errors.
func DecodeCiphertext(b []byte, p ckks.Parameters, degree, level int, what string) (ct *rlwe.Ciphertext, err error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s: %s", errs.ErrCorrupt, what, fmt.Sprintf(format, a...))
	}
	if degree < 0 || degree > 2 || level < 0 || level > p.MaxLevel() {
		return nil, bad("no ciphertext of degree %d at level %d under these parameters", degree, level)
	}
	if want := CiphertextSize(p, degree, level); len(b) != want {
		return nil, bad("%d bytes, a ciphertext of this shape has %d", len(b), want)
	}
	ct = ckks.NewCiphertext(p, degree, level)
	if err := checkLayout(b, ct); err != nil {
		return nil, bad("%v", err)
	}
	defer func() {
		if r := recover(); r != nil {
			ct, err = nil, bad("cannot decode: %v", r)
		}
	}()
	if err := ct.UnmarshalBinary(b); err != nil {
		return nil, bad("cannot decode: %v", err)
	}
	if ct.Degree() != degree || ct.Level() != level {
		return nil, bad("degree %d level %d, expected %d and %d", ct.Degree(), ct.Level(), degree, level)
	}
	if !ct.IsNTT || ct.IsMontgomery || ct.LogDimensions != p.LogMaxDimensions() {
		return nil, bad("unexpected encoding metadata")
	}
	if s := ct.Scale.Float64(); !(s > 0) || math.IsInf(s, 0) {
		return nil, bad("invalid scale %v", s)
	}
	q := p.Q()
	for _, poly := range ct.Value {
		for i, row := range poly.Coeffs {
			for _, c := range row {
				if c >= q[i] {
					return nil, bad("coefficient not reduced modulo its prime")
				}
			}
		}
	}
	return ct, nil
}

// metaSize is the size of a ciphertext's metadata in Lattigo's binary form
// (fixed: Lattigo formats it as fixed-width JSON).
func metaSize() int { return (&rlwe.MetaData{}).BinarySize() }

// CiphertextSize is the size of Lattigo's binary form of a ciphertext of
// the given degree and level under p, computed without allocating one.
func CiphertextSize(p ckks.Parameters, degree, level int) int {
	row := 8 + 8*p.N()
	poly := 8 + (level+1)*row
	return 1 + metaSize() + 8 + (degree+1)*poly
}

// checkLayout compares the size and every length field of b with those of
// the binary form of ref (a ciphertext of the expected shape).
func checkLayout(b []byte, ref *rlwe.Ciphertext) error {
	want := ref.BinarySize()
	if len(b) != want {
		return fmt.Errorf("%d bytes, a ciphertext of this shape has %d", len(b), want)
	}
	if b[0] != 1 {
		return fmt.Errorf("missing metadata")
	}
	off := 1 + ref.MetaData.BinarySize()
	field := func(expect int) error {
		if off+8 > len(b) {
			return fmt.Errorf("truncated")
		}
		if got := binary.LittleEndian.Uint64(b[off:]); got != uint64(expect) {
			return fmt.Errorf("length field %d at offset %d, expected %d", got, off, expect)
		}
		off += 8
		return nil
	}
	if err := field(len(ref.Value)); err != nil {
		return err
	}
	for _, poly := range ref.Value {
		if err := field(len(poly.Coeffs)); err != nil {
			return err
		}
		for _, row := range poly.Coeffs {
			if err := field(len(row)); err != nil {
				return err
			}
			off += 8 * len(row)
		}
	}
	if off != len(b) {
		return fmt.Errorf("layout ends at %d of %d bytes", off, len(b))
	}
	return nil
}
