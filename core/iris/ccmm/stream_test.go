package ccmm

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"encmatch/core/base/errs"
)

// memFile is an in-memory io.WriterAt.
type memFile struct{ b []byte }

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	if end := int(off) + len(p); end > len(f.b) {
		f.b = append(f.b, make([]byte, end-len(f.b))...)
	}
	return copy(f.b[off:], p), nil
}

// TestEncryptDBToAndStream: a database of two blocks and two and a half
// bands of columns, written band by band by EncryptDBTo and multiplied
// from its binary form a quarter of a block at a time (ReadDB,
// MultiplyRawFrom's bands), gives the same raw product as the decoded
// database in memory (whole blocks), and its scores equal the plaintext
// model after the rescale. Every noise is within its predicted bound.
func TestEncryptDBToAndStream(t *testing.T) {
	p := mustParams(t, Literal{LogNDB: 10, LogNQ: 9, LogQ: []int{20, 20, 20}, LogK: []int{20, 20, 20}, LogScale: 18, Inner: 2*BandCols + BandCols/2})
	rng := rand.New(rand.NewPCG(7, 3))
	d1, d3 := 2*p.NDB, 5
	sk, err := p.GenSecrets(d1)
	if err != nil {
		t.Fatal(err)
	}
	mdb := irisLike(rng, d1, p.Lit.Inner)
	mq := queryFrom(rng, mdb, d3)
	want, _ := MulInt(mdb, mq)
	qct, err := p.EncryptQuery(sk, mq)
	if err != nil {
		t.Fatal(err)
	}
	var enc, encs memFile
	if err := p.EncryptDBTo(sk, mdb, &enc, &encs); err != nil {
		t.Fatal(err)
	}
	// The a-parts are seeded (fresh, one seed per matrix): the files hold
	// the b-parts only.
	for _, f := range []struct {
		file *memFile
		cols int
	}{{&enc, p.Lit.Inner}, {&encs, p.NQ}} {
		if want := headerSize(len(p.allPrimes()), len(p.ModulusK().Bytes()), SeedSize) + int64(len(p.allPrimes())*d1*f.cols*3); int64(len(f.file.b)) != want {
			t.Fatalf("a database file of %d bytes, want %d (b-parts of 3 bytes per residue and a seed)", len(f.file.b), want)
		}
	}
	db := &DB{}
	for _, f := range []struct {
		file *memFile
		dst  **SharedA
	}{{&enc, &db.Enc}, {&encs, &db.EncS}} {
		if *f.dst, err = ReadSharedA(bytes.NewReader(f.file.b), int64(len(f.file.b)), nil); err != nil {
			t.Fatal(err)
		}
	}
	if db.Enc.Seed == nil || bytes.Equal(db.Enc.Seed, db.EncS.Seed) {
		t.Fatal("the database matrices are not seeded, or share a seed")
	}
	e, _ := Noise(p.DB, sk.DB, db.Enc, mdb)
	checkNoise(t, "database K*M written band by band", e, p.FreshBound())
	ms := p.MulSecret(sk.Query, mdb)
	msInt := NewIntMat(d1, p.NQ)
	for i, v := range ms.Data {
		msInt.Data[i] = int64(v)
	}
	e, _ = Noise(p.DB, sk.DB, db.EncS, msInt)
	checkNoise(t, "database K*M*S_q written band by band", e, p.FreshBound())

	inMemory, err := p.MultiplyRaw(db, qct)
	if err != nil {
		t.Fatal(err)
	}
	readers := func() (*SharedAReader, *SharedAReader) {
		a, err := NewSharedAReader(bytes.NewReader(enc.b), int64(len(enc.b)), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := NewSharedAReader(bytes.NewReader(encs.b), int64(len(encs.b)), nil)
		if err != nil {
			t.Fatal(err)
		}
		return a, b
	}
	src, blocks, err := p.ReadDB(readers())
	if err != nil || blocks != 2 {
		t.Fatalf("ReadDB: %d blocks, %v", blocks, err)
	}
	streamed, err := p.multiplyBands(src, blocks, qct, p.NDB/4) // the in-memory product reads whole blocks
	if err != nil {
		t.Fatal(err)
	}
	for i := range inMemory.Moduli {
		if !equal32(inMemory.A[i].Data, streamed.A[i].Data) || !equal32(inMemory.B[i].Data, streamed.B[i].Data) {
			t.Fatalf("prime %d: the streamed product differs from the in-memory one", i)
		}
	}
	res, err := p.Rescale(streamed)
	if err != nil {
		t.Fatal(err)
	}
	e, _ = Noise(p.DB, sk.DB, res, want)
	checkNoise(t, "streamed product, rescaled", e, p.ResultBoundFor(false))
	got, err := Decrypt(p.DB, sk.DB, res)
	if err != nil {
		t.Fatal(err)
	}
	equalInt(t, "streamed CCMM scores", got, want)

	// The files swapped, a residue out of range, a stream cut short.
	a, b := readers()
	if _, _, err := p.ReadDB(b, a); !errors.Is(err, errs.ErrMismatch) {
		t.Fatalf("the key part given as Enc: %v, want ErrMismatch", err)
	}
	bad := bytes.Clone(enc.b)
	off := headerSize(len(db.Enc.Moduli), len(db.Enc.Scale.Bytes()), SeedSize) + 3*3 // block 0 of prime 0 (A is seeded), 3 bytes per residue
	copy(bad[off:], []byte{0xff, 0xff, 0x7f})                                        // 2^23 - 1, far above q/2
	a, err = NewSharedAReader(bytes.NewReader(bad), int64(len(bad)), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, b = readers()
	src, _, _ = p.ReadDB(a, b)
	if _, err := p.MultiplyRawFrom(src, blocks, qct); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("a residue out of range: %v, want ErrCorrupt", err)
	}
	a, b = readers()
	src, _, _ = p.ReadDB(a, b)
	if _, err := p.MultiplyRawFrom(src, blocks+1, qct); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("reading past the end: %v, want ErrCorrupt", err)
	}
}

func equal32(a, b []int32) bool { return bytes.Equal(int32Bytes(a), int32Bytes(b)) }
