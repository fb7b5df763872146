package ccmm

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/big"
	"unsafe"

	"encmatch/core/errs"
)

// The binary form of a SharedA (little endian):
//
//	u8 LogN | u64 Rows | u64 Cols | u8 len(Moduli) | u64 Moduli[...] |
//	u16 len(scale) | scale (big-endian magnitude) |
//	per prime i: A[i] (N x Cols int32, row-major), B[i] (Rows x Cols int32)
//
// Residues are the centered int32 of Mat. The decoder checks every header
// field and the exact payload length before it allocates, and every residue
// against its prime after.

// headerSize is the size of the header for k moduli and a scale of s bytes.
func headerSize(k, s int) int64 { return 1 + 8 + 8 + 1 + 8*int64(k) + 2 + int64(s) }

// EncodedSize is the number of bytes WriteTo writes.
func (c *SharedA) EncodedSize() int64 {
	per := (int64(c.N()) + int64(c.Rows)) * int64(c.Cols) * 4
	return headerSize(len(c.Moduli), len(c.Scale.Bytes())) + per*int64(len(c.Moduli))
}

// WriteTo writes the binary form of c.
func (c *SharedA) WriteTo(w io.Writer) (int64, error) {
	var n int64
	put := func(v any) error {
		err := binary.Write(w, binary.LittleEndian, v)
		if err == nil {
			n += int64(binary.Size(v))
		}
		return err
	}
	scale := c.Scale.Bytes()
	for _, v := range []any{uint8(c.LogN), uint64(c.Rows), uint64(c.Cols), uint8(len(c.Moduli)), c.Moduli, uint16(len(scale))} {
		if err := put(v); err != nil {
			return n, err
		}
	}
	m, err := w.Write(scale)
	n += int64(m)
	if err != nil {
		return n, err
	}
	for i := range c.Moduli {
		for _, mat := range []Mat{c.A[i], c.B[i]} {
			m, err := w.Write(int32Bytes(mat.Data))
			n += int64(m)
			if err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// int32Bytes views residues as their little-endian bytes (amd64 and arm64
// are little endian; init refuses the others).
func int32Bytes(d []int32) []byte {
	if len(d) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&d[0])), 4*len(d))
}

func init() {
	x := uint16(1)
	if *(*byte)(unsafe.Pointer(&x)) != 1 {
		panic("ccmm: the binary form assumes a little-endian machine")
	}
}

// ReadSharedA decodes the binary form of a SharedA of exactly n bytes from
// untrusted input: ring degree at most 2^17, at most 64 primes, each below
// 2^MaxPrimeBits, rows a multiple of the ring degree, the length exact, the
// residues centered modulo their primes. A non-nil want fixes LogN, Rows,
// Cols, Moduli and Scale (Rows 0: any multiple of N).
func ReadSharedA(r io.Reader, n int64, want *SharedA) (*SharedA, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: encrypted matrix: %s", errs.ErrCorrupt, fmt.Sprintf(format, a...))
	}
	var head struct {
		LogN       uint8
		Rows, Cols uint64
		K          uint8
	}
	if n < headerSize(0, 0) {
		return nil, bad("%d bytes", n)
	}
	if err := binary.Read(r, binary.LittleEndian, &head); err != nil {
		return nil, bad("%v", err)
	}
	if head.LogN < 1 || head.LogN > 17 || head.K < 1 || head.K > 64 {
		return nil, bad("ring degree 2^%d, %d primes", head.LogN, head.K)
	}
	nDeg := uint64(1) << head.LogN
	if head.Rows == 0 || head.Rows%nDeg != 0 || head.Rows > 1<<34 || head.Cols == 0 || head.Cols > 1<<34 {
		return nil, bad("%d x %d matrix in ring 2^%d", head.Rows, head.Cols, head.LogN)
	}
	moduli := make([]uint64, head.K)
	if err := binary.Read(r, binary.LittleEndian, moduli); err != nil {
		return nil, bad("%v", err)
	}
	for _, q := range moduli {
		if q < 3 || q >= 1<<MaxPrimeBits {
			return nil, bad("prime %d", q)
		}
	}
	var sl uint16
	if err := binary.Read(r, binary.LittleEndian, &sl); err != nil {
		return nil, bad("%v", err)
	}
	// Size check before any matrix is allocated (products cannot overflow:
	// rows and columns are below 2^34, primes at most 64).
	per := (nDeg + head.Rows) * head.Cols * 4
	if per > 1<<40 || headerSize(int(head.K), int(sl))+int64(per)*int64(head.K) != n {
		return nil, bad("%d bytes for a %d x %d matrix of %d primes", n, head.Rows, head.Cols, head.K)
	}
	sb := make([]byte, sl)
	if _, err := io.ReadFull(r, sb); err != nil {
		return nil, bad("%v", err)
	}
	c := &SharedA{LogN: int(head.LogN), Rows: int(head.Rows), Cols: int(head.Cols), Moduli: moduli, Scale: new(big.Int).SetBytes(sb)}
	if c.Scale.Sign() == 0 {
		return nil, bad("scale 0")
	}
	if want != nil {
		if err := c.matches(want); err != nil {
			return nil, err
		}
	}
	for _, q := range moduli {
		a, b := NewMat(int(nDeg), c.Cols), NewMat(c.Rows, c.Cols)
		for _, m := range []Mat{a, b} {
			if _, err := io.ReadFull(r, int32Bytes(m.Data)); err != nil {
				return nil, bad("%v", err)
			}
			half := int32(q / 2)
			for _, v := range m.Data {
				if v > half || v < -half {
					return nil, bad("residue %d not centered modulo %d", v, q)
				}
			}
		}
		c.A, c.B = append(c.A, a), append(c.B, b)
	}
	return c, nil
}

// matches checks c's shape against want's (want.Rows 0: any).
func (c *SharedA) matches(want *SharedA) error {
	same := c.LogN == want.LogN && c.Cols == want.Cols && (want.Rows == 0 || c.Rows == want.Rows) &&
		len(c.Moduli) == len(want.Moduli) && c.Scale.Cmp(want.Scale) == 0
	for i := 0; same && i < len(c.Moduli); i++ {
		same = c.Moduli[i] == want.Moduli[i]
	}
	if !same {
		return fmt.Errorf("%w: an encrypted %dx%d matrix (ring 2^%d, primes %v, scale %v), expected %dx%d (ring 2^%d, primes %v, scale %v)",
			errs.ErrMismatch, c.Rows, c.Cols, c.LogN, c.Moduli, c.Scale, want.Rows, want.Cols, want.LogN, want.Moduli, want.Scale)
	}
	return nil
}
