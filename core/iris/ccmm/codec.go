package ccmm

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/big"
	"unsafe"

	"encmatch/core/base/errs"
)

// The binary form of a SharedA (little endian):
//
//	u8 LogN | u64 Rows | u64 Cols | u8 len(Moduli) | u64 Moduli[...] |
//	u16 len(scale) | scale (big-endian magnitude) |
//	u8 tag (seedTagAES set: SeedSize bytes of seed follow; tagPrimeWidths
//	set: each prime in its own width) | Seed |
//	per prime i: A[i] (N x Cols residues, row-major; absent when seeded),
//	             B[i] (Rows x Cols residues)
//
// Residues are the centered values of Mat, little endian, in
// residueWidths(Moduli, tag) bytes: with tagPrimeWidths (every form written
// since the folding preset's mixed primes) 3 bytes for a prime below 2^24
// and 4 for a larger one, prime by prime; without it (forms written
// before) 3 bytes when every prime is below 2^24 (the iris presets' 20- and
// 21-bit primes), else 4 for all. The decoder checks every header field and
// the exact payload length before it allocates, and every residue against
// its prime after; a seeded A is regenerated (seededA).

// seedTagAES marks a seed from which A is derived by AES-256 in counter
// mode (seededA). The tag SeedSize alone marks the a-parts of databases
// enrolled before it, derived by BLAKE2b: NewSharedAReader refuses them
// (ErrMismatch, with a message to enroll again), since reading one with
// this derivation would give wrong results.
const (
	seedTagAES    = 0x80 | SeedSize
	seedTagBLAKE2 = SeedSize
)

// tagPrimeWidths marks a binary form whose residues take each prime's own
// width (3 bytes below 2^24, else 4); forms without it, written before,
// take one width for all primes. A database of the folding preset (four
// primes of 20 and 22 bits among twelve of 29 and 30) is a quarter smaller
// with it.
const tagPrimeWidths = 0x40

// headerSize is the size of the header for k moduli, a scale of s bytes
// and a seed of seed bytes.
func headerSize(k, s, seed int) int64 {
	return 1 + 8 + 8 + 1 + 8*int64(k) + 2 + int64(s) + 1 + int64(seed)
}

// payload is the size of the matrices of the binary form: A (unless
// seeded) and B of every prime, widths[i] bytes per residue of prime i.
func payload(n, rows, cols int64, seeded bool, widths []int) int64 {
	perRow := int64(0)
	for _, w := range widths {
		perRow += int64(w)
	}
	if seeded {
		return rows * cols * perRow
	}
	return (n + rows) * cols * perRow
}

// residueWidths are the bytes per residue of each prime in the binary
// form: with perPrime (tagPrimeWidths) 3 for a prime whose centered
// residues fit a signed 24-bit integer (below 2^24), else 4; without, the
// older forms' one width for all, 3 when every prime is below 2^24, else
// 4.
func residueWidths(moduli []uint64, perPrime bool) []int {
	widths := make([]int, len(moduli))
	all := 3
	for i, q := range moduli {
		widths[i] = 3
		if q >= 1<<24 {
			widths[i], all = 4, 4
		}
	}
	if !perPrime {
		for i := range widths {
			widths[i] = all
		}
	}
	return widths
}

// putResidues writes residues to dst (len(src) * width bytes) in the
// binary form's width.
func putResidues(dst []byte, src []int32, width int) {
	if width == 4 {
		copy(dst, int32Bytes(src))
		return
	}
	for i, v := range src {
		dst[3*i], dst[3*i+1], dst[3*i+2] = byte(v), byte(v>>8), byte(v>>16)
	}
}

// getResidues reads len(dst) residues of the given width from src,
// sign-extending 3-byte ones.
func getResidues(dst []int32, src []byte, width int) {
	if width == 4 {
		copy(int32Bytes(dst), src)
		return
	}
	for i := range dst {
		dst[i] = int32(uint32(src[3*i])<<8|uint32(src[3*i+1])<<16|uint32(src[3*i+2])<<24) >> 8
	}
}

// EncodedSize is the number of bytes WriteTo writes.
func (c *SharedA) EncodedSize() int64 {
	return headerSize(len(c.Moduli), len(c.Scale.Bytes()), len(c.Seed)) +
		payload(int64(c.N()), int64(c.Rows), int64(c.Cols), c.Seed != nil, residueWidths(c.Moduli, true))
}

// WriteTo writes the binary form of c.
func (c *SharedA) WriteTo(w io.Writer) (int64, error) {
	cw := &countingWriter{w: w}
	if err := c.writeHeader(cw); err != nil {
		return cw.n, err
	}
	widths := residueWidths(c.Moduli, true)
	for i := range c.Moduli {
		for _, mat := range c.stored(i) {
			b := make([]byte, widths[i]*len(mat.Data))
			putResidues(b, mat.Data, widths[i])
			if _, err := cw.Write(b); err != nil {
				return cw.n, err
			}
		}
	}
	return cw.n, nil
}

// stored lists the matrices of prime i that the binary form holds: A and
// B, or B alone when A is seeded.
func (c *SharedA) stored(i int) []Mat {
	if c.Seed != nil {
		return []Mat{c.B[i]}
	}
	return []Mat{c.A[i], c.B[i]}
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// writeHeader writes the header of c's binary form (no matrices).
func (c *SharedA) writeHeader(w io.Writer) error {
	scale := c.Scale.Bytes()
	for _, v := range []any{uint8(c.LogN), uint64(c.Rows), uint64(c.Cols), uint8(len(c.Moduli)), c.Moduli, uint16(len(scale))} {
		if err := binary.Write(w, binary.LittleEndian, v); err != nil {
			return err
		}
	}
	if _, err := w.Write(scale); err != nil {
		return err
	}
	if c.Seed != nil && len(c.Seed) != SeedSize {
		return fmt.Errorf("%w: a seed of %d bytes", errs.ErrInvalid, len(c.Seed))
	}
	tag := byte(tagPrimeWidths)
	if c.Seed != nil {
		tag |= seedTagAES
	}
	_, err := w.Write(append([]byte{tag}, c.Seed...))
	return err
}

// writeBand writes band (c's rows, columns j0 .. j0+band.Cols, every
// prime) at its place in c's binary form: one write per row and prime.
func (c *SharedA) writeBand(w io.WriterAt, band *SharedA, j0 int) error {
	if band.Rows != c.Rows || j0 < 0 || j0+band.Cols > c.Cols || len(band.A) != len(c.Moduli) || (band.Seed == nil) != (c.Seed == nil) {
		return fmt.Errorf("%w: band of %dx%d at column %d of a %dx%d matrix", errs.ErrInvalid, band.Rows, band.Cols, j0, c.Rows, c.Cols)
	}
	off := headerSize(len(c.Moduli), len(c.Scale.Bytes()), len(c.Seed))
	widths := residueWidths(c.Moduli, true)
	for i := range c.Moduli {
		width := int64(widths[i])
		row := make([]byte, width*int64(band.Cols))
		for _, m := range band.stored(i) {
			for r := 0; r < m.Rows; r++ {
				putResidues(row, m.Data[r*m.Cols:(r+1)*m.Cols], int(width))
				if _, err := w.WriteAt(row, off+width*(int64(r)*int64(c.Cols)+int64(j0))); err != nil {
					return err
				}
			}
			off += width * int64(m.Rows) * int64(c.Cols)
		}
	}
	return nil
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
	sr, err := NewSharedAReader(r, n, want)
	if err != nil {
		return nil, err
	}
	c := sr.Head
	for range c.Moduli {
		a, b := NewMat(c.N(), c.Cols), NewMat(c.Rows, c.Cols) // a seeded A is regenerated by Next
		if err := sr.Next(&a); err != nil {
			return nil, err
		}
		if err := sr.Next(&b); err != nil {
			return nil, err
		}
		c.A, c.B = append(c.A, a), append(c.B, b)
	}
	return c, nil
}

// SharedAReader decodes the binary form of a SharedA from untrusted input
// a block of rows at a time, in the form's order: for each prime, the N
// rows of A (regenerated from the seed when seeded, all N at once), then
// the Rows rows of B. It holds one block, never the whole matrix
// (ReadSharedA's checks, residue by residue as they arrive).
type SharedAReader struct {
	Head   *SharedA // the header: shape, moduli, scale and seed, no matrices
	r      io.Reader
	seeded *seededA // nil unless Head.Seed is set
	widths []int    // bytes per residue of each prime (residueWidths)
	buf    []byte   // Next's read buffer (3-byte residues)
	prime  int      // the prime being read
	row    int      // rows of that prime read (A's N, then B's)
}

// NewSharedAReader reads and checks the header of a binary form of
// exactly n bytes (the length is checked against the header before any
// matrix is read).
func NewSharedAReader(r io.Reader, n int64, want *SharedA) (*SharedAReader, error) {
	var head struct {
		LogN       uint8
		Rows, Cols uint64
		K          uint8
	}
	if n < headerSize(0, 0, 0) {
		return nil, badMatrix("%d bytes", n)
	}
	if err := binary.Read(r, binary.LittleEndian, &head); err != nil {
		return nil, badMatrix("%v", err)
	}
	if head.LogN < 1 || head.LogN > 17 || head.K < 1 || head.K > 64 {
		return nil, badMatrix("ring degree 2^%d, %d primes", head.LogN, head.K)
	}
	nDeg := uint64(1) << head.LogN
	if head.Rows == 0 || head.Rows%nDeg != 0 || head.Rows > 1<<34 || head.Cols == 0 || head.Cols > 1<<34 {
		return nil, badMatrix("%d x %d matrix in ring 2^%d", head.Rows, head.Cols, head.LogN)
	}
	moduli := make([]uint64, head.K)
	if err := binary.Read(r, binary.LittleEndian, moduli); err != nil {
		return nil, badMatrix("%v", err)
	}
	for _, q := range moduli {
		if q < 3 || q >= 1<<MaxPrimeBits {
			return nil, badMatrix("prime %d", q)
		}
	}
	var sl uint16
	if err := binary.Read(r, binary.LittleEndian, &sl); err != nil {
		return nil, badMatrix("%v", err)
	}
	if int64(sl) > n {
		return nil, badMatrix("a scale of %d bytes in %d", sl, n)
	}
	sb := make([]byte, sl)
	if _, err := io.ReadFull(r, sb); err != nil {
		return nil, badMatrix("%v", err)
	}
	var tag [1]byte
	if _, err := io.ReadFull(r, tag[:]); err != nil {
		return nil, badMatrix("%v", err)
	}
	switch tag[0] {
	case 0, seedTagAES, tagPrimeWidths, tagPrimeWidths | seedTagAES:
	case seedTagBLAKE2:
		return nil, fmt.Errorf("%w: encrypted matrix: its a-part is derived from its seed by BLAKE2b, as databases enrolled "+
			"before the AES-CTR derivation (November 2026) were; this version cannot read it: enroll the gallery again", errs.ErrMismatch)
	default:
		return nil, badMatrix("seed tag %#x", tag[0])
	}
	seedLen := 0
	if tag[0]&^tagPrimeWidths != 0 {
		seedLen = SeedSize
	}
	// Size check before any matrix is allocated (the payload cannot
	// overflow: at most 2^40 residues per prime, 64 primes of 4 bytes).
	if head.Cols > (1<<40)/(nDeg+head.Rows) {
		return nil, badMatrix("%d x %d matrix in ring 2^%d: over 2^40 residues per prime", head.Rows, head.Cols, head.LogN)
	}
	widths := residueWidths(moduli, tag[0]&tagPrimeWidths != 0)
	if headerSize(int(head.K), int(sl), seedLen)+payload(int64(nDeg), int64(head.Rows), int64(head.Cols), seedLen != 0, widths) != n {
		return nil, badMatrix("%d bytes for a %d x %d matrix of %d primes", n, head.Rows, head.Cols, head.K)
	}
	c := &SharedA{LogN: int(head.LogN), Rows: int(head.Rows), Cols: int(head.Cols), Moduli: moduli, Scale: new(big.Int).SetBytes(sb)}
	if c.Scale.Sign() == 0 {
		return nil, badMatrix("scale 0")
	}
	sr := &SharedAReader{Head: c, r: r, widths: widths}
	if seedLen != 0 {
		c.Seed = make([]byte, SeedSize)
		if _, err := io.ReadFull(r, c.Seed); err != nil {
			return nil, badMatrix("%v", err)
		}
		var err error
		if sr.seeded, err = newSeededA(c.Seed, int(nDeg), moduli); err != nil {
			return nil, badMatrix("%v", err)
		}
	}
	if want != nil {
		if err := c.matches(want); err != nil {
			return nil, err
		}
	}
	return sr, nil
}

func badMatrix(format string, a ...any) error {
	return fmt.Errorf("%w: encrypted matrix: %s", errs.ErrCorrupt, fmt.Sprintf(format, a...))
}

// Next reads the next dst.Rows rows (Head.Cols columns; a whole number of
// them within the current prime's A or B) into dst and checks that every
// residue is centered modulo the prime.
func (s *SharedAReader) Next(dst *Mat) error {
	c := s.Head
	n := c.N()
	if s.prime >= len(c.Moduli) {
		return badMatrix("read past the last prime")
	}
	inA := s.row < n
	end := n
	if !inA {
		end = n + c.Rows
	}
	if dst.Cols != c.Cols || dst.Rows <= 0 || s.row+dst.Rows > end || len(dst.Data) != dst.Rows*dst.Cols ||
		inA && s.seeded != nil && dst.Rows != n {
		return fmt.Errorf("%w: a block of %dx%d at row %d of prime %d of a %dx%d matrix in ring %d", errs.ErrInvalid, dst.Rows, dst.Cols, s.row, s.prime, c.Rows, c.Cols, n)
	}
	if inA && s.seeded != nil {
		s.seeded.fill(*dst, s.prime, 0)
		s.row += n
		return nil
	}
	if width := s.widths[s.prime]; width == 4 {
		if _, err := io.ReadFull(s.r, int32Bytes(dst.Data)); err != nil {
			return badMatrix("%v", err)
		}
	} else {
		if need := width * len(dst.Data); len(s.buf) < need {
			s.buf = make([]byte, need)
		}
		b := s.buf[:width*len(dst.Data)]
		if _, err := io.ReadFull(s.r, b); err != nil {
			return badMatrix("%v", err)
		}
		getResidues(dst.Data, b, width)
	}
	q := c.Moduli[s.prime]
	half := int32(q / 2)
	for _, v := range dst.Data {
		if v > half || v < -half {
			return badMatrix("residue %d not centered modulo %d", v, q)
		}
	}
	if s.row += dst.Rows; s.row == n+c.Rows {
		s.prime, s.row = s.prime+1, 0
	}
	return nil
}

// matches checks c's shape against want's (want.Rows 0: any; of
// want.Seed only whether it is set counts).
func (c *SharedA) matches(want *SharedA) error {
	same := c.LogN == want.LogN && c.Cols == want.Cols && (want.Rows == 0 || c.Rows == want.Rows) &&
		len(c.Moduli) == len(want.Moduli) && c.Scale.Cmp(want.Scale) == 0 && (c.Seed == nil) == (want.Seed == nil)
	for i := 0; same && i < len(c.Moduli); i++ {
		same = c.Moduli[i] == want.Moduli[i]
	}
	if !same {
		return fmt.Errorf("%w: an encrypted %dx%d matrix (ring 2^%d, primes %v, scale %v), expected %dx%d (ring 2^%d, primes %v, scale %v)",
			errs.ErrMismatch, c.Rows, c.Cols, c.LogN, c.Moduli, c.Scale, want.Rows, want.Cols, want.LogN, want.Moduli, want.Scale)
	}
	return nil
}
