package codec

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"

	"encmatch/core/base/errs"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// Packed ciphertexts store each RNS coefficient in the bit width of its
// prime instead of a 64-bit word (about 46 bits on average at the default
// parameters: 28 % less than Lattigo's encoding). Layout: Lattigo's
// metadata (fixed size for a given shape), then for each polynomial and
// each prime q_i, the N coefficients as a little-endian bit stream of
// bitlen(q_i) bits each, padded to a whole byte.

// PackedSize is the size of a packed ciphertext of the given shape.
// It allocates nothing.
func PackedSize(p ckks.Parameters, degree, level int) int {
	n := metaSize()
	for _, q := range p.Q()[:level+1] {
		n += (degree + 1) * ((p.N()*bits.Len64(q) + 7) / 8)
	}
	return n
}

// PackCiphertext encodes ct with packed coefficients.
func PackCiphertext(ct *rlwe.Ciphertext, p ckks.Parameters) ([]byte, error) {
	meta, err := ct.MetaData.MarshalBinary()
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, PackedSize(p, ct.Degree(), ct.Level()))
	out = append(out, meta...)
	q := p.Q()
	for _, poly := range ct.Value {
		for i, row := range poly.Coeffs[:ct.Level()+1] {
			out = packBits(out, row, uint(bits.Len64(q[i])))
		}
	}
	return out, nil
}

// UnpackCiphertext decodes a packed ciphertext of the given shape from
// untrusted bytes: exact size, metadata as expected, every coefficient
// reduced modulo its prime.
func UnpackCiphertext(b []byte, p ckks.Parameters, degree, level int, what string) (*rlwe.Ciphertext, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s: %s", errs.ErrCorrupt, what, fmt.Sprintf(format, a...))
	}
	if degree < 0 || degree > 2 || level < 0 || level > p.MaxLevel() {
		return nil, bad("no ciphertext of degree %d at level %d under these parameters", degree, level)
	}
	if want := PackedSize(p, degree, level); len(b) != want {
		return nil, bad("%d bytes, a packed ciphertext of this shape has %d", len(b), want)
	}
	ct := ckks.NewCiphertext(p, degree, level)
	m := ct.MetaData.BinarySize()
	if err := unmarshalMeta(ct, b[:m]); err != nil {
		return nil, bad("metadata: %v", err)
	}
	if !ct.IsNTT || ct.IsMontgomery || ct.LogDimensions != p.LogMaxDimensions() {
		return nil, bad("unexpected encoding metadata")
	}
	if s := ct.Scale.Float64(); !(s > 0) || math.IsInf(s, 0) {
		return nil, bad("invalid scale %v", s)
	}
	off := m
	q := p.Q()
	for _, poly := range ct.Value {
		for i := range poly.Coeffs[:level+1] {
			w := uint(bits.Len64(q[i]))
			n := (p.N()*int(w) + 7) / 8
			if !unpackBits(b[off:off+n], poly.Coeffs[i], w, q[i]) {
				return nil, bad("coefficient not reduced modulo its prime")
			}
			off += n
		}
	}
	return ct, nil
}

func unmarshalMeta(ct *rlwe.Ciphertext, b []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	return ct.MetaData.UnmarshalBinary(b)
}

// packBits appends the values (each < 2^w, 1 <= w <= 63) as a w-bit
// little-endian bit stream, padded to a whole byte.
func packBits(out []byte, vals []uint64, w uint) []byte {
	var acc uint64 // pending bits, lowest first
	var n uint     // number of pending bits, < 64
	for _, v := range vals {
		acc |= v << n
		if n+w < 64 {
			n += w
			continue
		}
		out = binary.LittleEndian.AppendUint64(out, acc)
		if n == 0 {
			acc = 0
		} else {
			acc = v >> (64 - n)
		}
		n = n + w - 64
	}
	for ; n > 0; n -= min(n, 8) {
		out = append(out, byte(acc))
		acc >>= 8
	}
	return out
}

// unpackBits reads len(dst) w-bit values from a stream made by packBits; it
// reports false if any value is >= q.
func unpackBits(src []byte, dst []uint64, w uint, q uint64) bool {
	mask := uint64(1)<<w - 1
	ok := true
	var word [9]byte
	for j := range dst {
		bit := uint(j) * w
		k, sh := bit/8, bit%8
		// The value lies in bytes k..k+8 (w + 7 <= 70 bits); near the end
		// of the stream, copy them into a zero-padded word first.
		buf := src[k:]
		if len(buf) < 9 {
			word = [9]byte{}
			copy(word[:], buf)
			buf = word[:]
		}
		v := binary.LittleEndian.Uint64(buf) >> sh
		if sh > 0 {
			v |= uint64(buf[8]) << (64 - sh)
		}
		dst[j] = v & mask
		if dst[j] >= q {
			ok = false
		}
	}
	return ok
}
