package codec

import (
	"encoding/binary"
	"errors"
	"testing"

	"encmatch/core/errs"
	"encmatch/core/params"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

func sample(t testing.TB) (ckks.Parameters, []byte) {
	set, err := params.New(params.Toy, 6, 8)
	if err != nil {
		t.Fatal(err)
	}
	p := set.CKKS
	sk := rlwe.NewKeyGenerator(p).GenSecretKeyNew()
	ct, err := rlwe.NewEncryptor(p, sk).EncryptNew(ckks.NewPlaintext(p, p.MaxLevel()))
	if err != nil {
		t.Fatal(err)
	}
	b, err := ct.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return p, b
}

func TestDecodeChecksShapeAndContent(t *testing.T) {
	p, b := sample(t)
	if _, err := DecodeCiphertext(b, p, 1, p.MaxLevel(), "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeCiphertext(b, p, 1, 0, "x"); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("wrong level accepted: %v", err)
	}
	// A huge length field must be refused before Lattigo allocates it.
	huge := append([]byte(nil), b...)
	off := 1 + ckks.NewCiphertext(p, 1, p.MaxLevel()).MetaData.BinarySize()
	binary.LittleEndian.PutUint64(huge[off+8:], 1<<40)
	if _, err := DecodeCiphertext(huge, p, 1, p.MaxLevel(), "x"); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("huge length accepted: %v", err)
	}
	unreduced := append([]byte(nil), b...)
	binary.LittleEndian.PutUint64(unreduced[len(unreduced)-8:], ^uint64(0))
	if _, err := DecodeCiphertext(unreduced, p, 1, p.MaxLevel(), "x"); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("unreduced coefficient accepted: %v", err)
	}
}

func FuzzDecodeCiphertext(f *testing.F) {
	p, b := sample(f)
	f.Add(b)
	f.Add(b[:100])
	f.Fuzz(func(t *testing.T, data []byte) {
		DecodeCiphertext(data, p, 1, p.MaxLevel(), "fuzz")
	})
}
