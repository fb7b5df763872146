package ccmm

import (
	"bytes"
	"crypto/aes"
	"encoding/binary"
	"errors"
	"math/big"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"encmatch/core/base/errs"
)

// smallSharedA is a valid 2-prime encrypted matrix in ring 2^4 (the fuzz
// seed: small enough for millions of executions).
func smallSharedA() *SharedA { return smallSharedAModulo([]uint64{97, 193}) }

// smallSharedAModulo is smallSharedA's shape at other primes.
func smallSharedAModulo(moduli []uint64) *SharedA {
	rng := rand.New(rand.NewPCG(1, 2))
	c := &SharedA{LogN: 4, Rows: 32, Cols: 3, Moduli: moduli, Scale: big.NewInt(1 << 20)}
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

// smallSeededSharedA is smallSharedA with its A derived from a seed.
func smallSeededSharedA() *SharedA {
	c := smallSharedA()
	c.Seed = bytes.Repeat([]byte{7}, SeedSize)
	s, err := newSeededA(c.Seed, c.N(), c.Moduli)
	if err != nil {
		panic(err)
	}
	for i := range c.Moduli {
		s.fill(c.A[i], i, 0)
	}
	return c
}

// TestSeededAStream: the seeded a-part's column j modulo prime i is
// Lattigo's uniform sampler (big-endian 64-bit words, masked, rejected at
// q or more) on AES-256 of the counter blocks j || i || 0, 1, 2, ... under
// the seed, computed here block by block with crypto/aes; a change of the
// derivation would make every enrolled database decrypt to noise.
func TestSeededAStream(t *testing.T) {
	seed := make([]byte, SeedSize)
	for i := range seed {
		seed[i] = byte(3*i + 1)
	}
	moduli := []uint64{1146881, 536903681}
	s, err := newSeededA(seed, 1<<12, moduli)
	if err != nil {
		t.Fatal(err)
	}
	block, err := aes.NewCipher(seed)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ j, i int }{{0, 0}, {5, 1}, {4095, 0}} {
		got := make([]uint64, 1<<12)
		s.column(c.j, c.i, got)
		q := moduli[c.i]
		mask := uint64(1)<<bits.Len64(q-1) - 1
		var ctr, ks [aes.BlockSize]byte
		binary.BigEndian.PutUint64(ctr[:8], uint64(c.j))
		binary.BigEndian.PutUint32(ctr[8:12], uint32(c.i))
		for k, word := 0, 0; k < len(got); word++ {
			if word%2 == 0 { // the next key stream block
				block.Encrypt(ks[:], ctr[:])
				binary.BigEndian.PutUint32(ctr[12:], binary.BigEndian.Uint32(ctr[12:])+1)
			}
			v := binary.BigEndian.Uint64(ks[8*(word%2):]) & mask
			if v >= q {
				continue
			}
			if got[k] != v {
				t.Fatalf("column %d prime %d coefficient %d: %d, want %d", c.j, c.i, k, got[k], v)
			}
			k++
		}
	}
}

// TestResidueWidths: 3-byte residues round-trip every centered value of a
// prime below 2^24 (the extremes included), and a prime of 2^24 or more
// takes 4 bytes.
func TestResidueWidths(t *testing.T) {
	const q = 1<<24 - 3
	vals := []int32{0, 1, -1, q / 2, -(q / 2), 1 << 22, -(1 << 22), 12345, -54321}
	b := make([]byte, 3*len(vals))
	putResidues(b, vals, 3)
	got := make([]int32, len(vals))
	getResidues(got, b, 3)
	if !slices.Equal(got, vals) {
		t.Fatalf("3-byte residues: %v, want %v", got, vals)
	}
	mixed := []uint64{97, 1 << 24, q, 1<<29 + 11}
	if !slices.Equal(residueWidths(mixed, true), []int{3, 4, 3, 4}) || !slices.Equal(residueWidths(mixed, false), []int{4, 4, 4, 4}) ||
		!slices.Equal(residueWidths([]uint64{97, q}, false), []int{3, 3}) {
		t.Fatal("residue widths")
	}
}

// TestSharedAWidths: the binary form stores each prime in its own width
// (a matrix over a 7-bit and a 26-bit prime takes 3 + 4 bytes per
// position); a form written before (one width for all primes, no
// tagPrimeWidths) still reads to the same matrix; a header whose rows times
// columns would overflow the size computation is corrupt, not a panic.
func TestSharedAWidths(t *testing.T) {
	for _, c := range []*SharedA{smallSharedAModulo([]uint64{97, 1<<25 + 35}), smallSeededSharedA()} {
		positions := int64(c.Rows * c.Cols)
		if c.Seed == nil {
			positions += int64(c.N() * c.Cols)
		}
		perPosition := int64(0)
		for _, w := range residueWidths(c.Moduli, true) {
			perPosition += int64(w)
		}
		if got := c.EncodedSize() - headerSize(len(c.Moduli), len(c.Scale.Bytes()), len(c.Seed)); got != positions*perPosition {
			t.Fatalf("payload of %d bytes, want %d x %d", got, positions, perPosition)
		}
		old := legacyForm(t, c)
		got, err := ReadSharedA(bytes.NewReader(old), int64(len(old)), nil)
		if err != nil {
			t.Fatalf("a form of one width: %v", err)
		}
		for i := range c.Moduli {
			if !slices.Equal(got.A[i].Data, c.A[i].Data) || !slices.Equal(got.B[i].Data, c.B[i].Data) {
				t.Fatalf("prime %d of a form of one width differs", i)
			}
		}
	}
	var buf bytes.Buffer
	c := smallSharedA()
	if _, err := c.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	binary.LittleEndian.PutUint64(b[1:], 1<<33)
	binary.LittleEndian.PutUint64(b[9:], 1<<31)
	if _, err := ReadSharedA(bytes.NewReader(b), int64(len(b)), nil); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("a 2^33 x 2^31 header: %v", err)
	}
}

// legacyForm writes c as forms before tagPrimeWidths did: one residue
// width for all primes, the tag without the flag.
func legacyForm(t *testing.T, c *SharedA) []byte {
	var buf bytes.Buffer
	if err := c.writeHeader(&buf); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	tagAt := headerSize(len(c.Moduli), len(c.Scale.Bytes()), 0) - 1
	b[tagAt] &^= tagPrimeWidths
	widths := residueWidths(c.Moduli, false)
	for i := range c.Moduli {
		for _, m := range c.stored(i) {
			r := make([]byte, widths[i]*len(m.Data))
			putResidues(r, m.Data, widths[i])
			b = append(b, r...)
		}
	}
	return b
}

// TestSharedARoundTrip: WriteTo then ReadSharedA gives the same matrix
// (with A stored, and with A regenerated from its seed, whose form is
// smaller by A's bytes); a wrong expected shape or seededness is a
// mismatch, every truncation corrupt, a seed of another length corrupt, an
// a-part seeded for BLAKE2b (before the AES-CTR derivation) refused with a
// message.
func TestSharedARoundTrip(t *testing.T) {
	t.Run("stored", func(t *testing.T) { testSharedARoundTrip(t, smallSharedA()) })
	t.Run("four-byte residues", func(t *testing.T) { testSharedARoundTrip(t, smallSharedAModulo([]uint64{97, 1<<25 + 35})) })
	t.Run("seeded", func(t *testing.T) {
		c := smallSeededSharedA()
		testSharedARoundTrip(t, c)
		if diff := smallSharedA().EncodedSize() - c.EncodedSize(); diff != int64(len(c.Moduli)*c.N()*c.Cols*3-SeedSize) {
			t.Fatalf("the seeded form is %d bytes smaller", diff)
		}
		var buf bytes.Buffer
		if _, err := c.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadSharedA(bytes.NewReader(buf.Bytes()), int64(buf.Len()), &SharedA{LogN: 4, Cols: 3, Moduli: c.Moduli, Scale: c.Scale}); !errors.Is(err, errs.ErrMismatch) {
			t.Fatalf("a seeded matrix where a stored one is expected: %v", err)
		}
		b := buf.Bytes()
		seedAt := headerSize(len(c.Moduli), len(c.Scale.Bytes()), 0) - 1
		b[seedAt] = seedTagBLAKE2 // a database enrolled before the AES-CTR derivation
		if _, err := ReadSharedA(bytes.NewReader(b), int64(len(b)), nil); !errors.Is(err, errs.ErrMismatch) ||
			!strings.Contains(err.Error(), "enroll the gallery again") {
			t.Fatalf("an a-part seeded for BLAKE2b: %v", err)
		}
		b[seedAt] = SeedSize - 1
		if _, err := ReadSharedA(bytes.NewReader(b), int64(len(b)), nil); !errors.Is(err, errs.ErrCorrupt) {
			t.Fatalf("a seed of %d bytes: %v", SeedSize-1, err)
		}
	})
}

func testSharedARoundTrip(t *testing.T, c *SharedA) {
	var buf bytes.Buffer
	if n, err := c.WriteTo(&buf); err != nil || n != c.EncodedSize() {
		t.Fatalf("wrote %d bytes (%v), EncodedSize %d", n, err, c.EncodedSize())
	}
	got, err := ReadSharedA(bytes.NewReader(buf.Bytes()), int64(buf.Len()), &SharedA{LogN: 4, Cols: 3, Moduli: c.Moduli, Scale: c.Scale, Seed: c.Seed})
	if err != nil {
		t.Fatal(err)
	}
	for i := range c.Moduli {
		if !slices.Equal(got.A[i].Data, c.A[i].Data) || !slices.Equal(got.B[i].Data, c.B[i].Data) {
			t.Fatalf("prime %d differs after the round trip", i)
		}
	}
	if _, err := ReadSharedA(bytes.NewReader(buf.Bytes()), int64(buf.Len()), &SharedA{LogN: 4, Cols: 4, Moduli: c.Moduli, Scale: c.Scale, Seed: c.Seed}); !errors.Is(err, errs.ErrMismatch) {
		t.Fatalf("another shape: %v, want a mismatch", err)
	}
	for _, cut := range []int{0, 5, 30, buf.Len() - 1} {
		if _, err := ReadSharedA(bytes.NewReader(buf.Bytes()[:cut]), int64(cut), nil); !errors.Is(err, errs.ErrCorrupt) {
			t.Fatalf("truncated to %d bytes: %v, want corrupt", cut, err)
		}
	}
}

// FuzzReadSharedA: no input makes the decoder panic or allocate past the
// input's length; it refuses as corrupt, or an a-part seeded for BLAKE2b
// as a mismatch; whatever it accepts is centered and round-trips.
func FuzzReadSharedA(f *testing.F) {
	for _, c := range []*SharedA{smallSharedA(), smallSeededSharedA(), smallSharedAModulo([]uint64{97, 1<<25 + 35})} {
		var buf bytes.Buffer
		_, _ = c.WriteTo(&buf)
		f.Add(buf.Bytes())
		f.Add(legacyForm(&testing.T{}, c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ReadSharedA(bytes.NewReader(b), int64(len(b)), nil)
		if err != nil {
			if !errors.Is(err, errs.ErrCorrupt) && !(errors.Is(err, errs.ErrMismatch) && strings.Contains(err.Error(), "BLAKE2b")) {
				t.Fatalf("error of another kind: %v", err)
			}
			return
		}
		var out bytes.Buffer
		if _, err := c.WriteTo(&out); err != nil {
			t.Fatal(err)
		}
		if tagAt := headerSize(len(c.Moduli), len(c.Scale.Bytes()), 0) - 1; b[tagAt]&tagPrimeWidths != 0 && !bytes.Equal(out.Bytes(), b) {
			t.Fatal("accepted bytes do not round-trip")
		}
		again, err := ReadSharedA(bytes.NewReader(out.Bytes()), int64(out.Len()), nil)
		if err != nil {
			t.Fatalf("re-encoded form refused: %v", err)
		}
		for i := range c.Moduli {
			if !slices.Equal(again.A[i].Data, c.A[i].Data) || !slices.Equal(again.B[i].Data, c.B[i].Data) {
				t.Fatalf("prime %d changed through re-encoding", i)
			}
		}
	})
}
