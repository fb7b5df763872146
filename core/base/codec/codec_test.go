package codec

import (
	"encmatch/core/internal/fuzzpatch"
	"encoding/binary"
	"errors"
	"testing"

	"encmatch/core/base/errs"
	"encmatch/core/base/params"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

func sample(t testing.TB) (ckks.Parameters, []byte) {
	set, err := params.New(params.Toy, params.MinKappa, 8)
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

// tinyCiphertext is a fresh ciphertext at the top level of fuzzpatch.TinyParams, in
// Lattigo's encoding (about 1 KB).
func tinyCiphertext() []byte {
	p := fuzzpatch.TinyParams()
	sk := rlwe.NewKeyGenerator(p).GenSecretKeyNew()
	ct, err := rlwe.NewEncryptor(p, sk).EncryptNew(ckks.NewPlaintext(p, p.MaxLevel()))
	if err != nil {
		panic(err)
	}
	b, _ := ct.MarshalBinary()
	return b
}

// FuzzDecodeCiphertext patches a valid ciphertext of fuzzpatch.TinyParams (about
// 1 KB) and decodes it.
func FuzzDecodeCiphertext(f *testing.F) {
	p := fuzzpatch.TinyParams()
	fuzzPatched(f, tinyCiphertext(), func(b []byte) error {
		_, err := DecodeCiphertext(b, p, 1, p.MaxLevel(), "fuzz")
		return err
	})
}

func TestPackBitsRoundTrip(t *testing.T) {
	for w := uint(1); w <= 63; w++ {
		for _, count := range []int{1, 7, 8, 9, 64, 1001} {
			roundTrip(t, w, count)
		}
	}
}

// roundTrip packs count w-bit values and unpacks them, and checks the
// range check: a bound at the largest value refuses it.
func roundTrip(t *testing.T, w uint, count int) {
	t.Helper()
	vals := make([]uint64, count)
	var top uint64
	for i := range vals {
		vals[i] = (uint64(i)*0x9E3779B97F4A7C15 + 12345) & (1<<w - 1)
		top = max(top, vals[i])
	}
	b := packBits(nil, vals, w)
	if len(b) != (len(vals)*int(w)+7)/8 {
		t.Fatalf("w=%d: %d bytes", w, len(b))
	}
	got := make([]uint64, len(vals))
	if !unpackBits(b, got, w, ^uint64(0)) {
		t.Fatalf("w=%d: range check failed", w)
	}
	for i := range vals {
		if got[i] != vals[i] {
			t.Fatalf("w=%d count %d value %d: %x != %x", w, count, i, got[i], vals[i])
		}
	}
	if unpackBits(b, got, w, top) {
		t.Fatalf("w=%d count %d: a value equal to the bound passed the range check", w, count)
	}
}

func TestPackedCiphertext(t *testing.T) {
	p, b := sample(t)
	ct, err := DecodeCiphertext(b, p, 1, p.MaxLevel(), "x")
	if err != nil {
		t.Fatal(err)
	}
	packed, err := PackCiphertext(ct, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(packed) != PackedSize(p, 1, p.MaxLevel()) || len(packed) >= len(b)*8/10 {
		t.Fatalf("packed %d bytes, Lattigo's encoding %d", len(packed), len(b))
	}
	back, err := UnpackCiphertext(packed, p, 1, p.MaxLevel(), "x")
	if err != nil {
		t.Fatal(err)
	}
	again, _ := back.MarshalBinary()
	if string(again) != string(b) {
		t.Fatal("packed round trip changed the ciphertext")
	}
	if _, err := UnpackCiphertext(packed[:len(packed)-1], p, 1, p.MaxLevel(), "x"); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("truncated: %v", err)
	}
	bad := append([]byte(nil), packed...)
	for i := len(bad) - 64; i < len(bad); i++ {
		bad[i] = 0xff // top coefficients of the last prime: >= q
	}
	if _, err := UnpackCiphertext(bad, p, 1, p.MaxLevel(), "x"); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("unreduced: %v", err)
	}
}

// FuzzUnpackCiphertext patches a valid packed ciphertext of fuzzpatch.TinyParams and
// decodes it.
func FuzzUnpackCiphertext(f *testing.F) {
	p := fuzzpatch.TinyParams()
	ct, err := DecodeCiphertext(tinyCiphertext(), p, 1, p.MaxLevel(), "x")
	if err != nil {
		f.Fatal(err)
	}
	packed, _ := PackCiphertext(ct, p)
	fuzzPatched(f, packed, func(b []byte) error {
		_, err := UnpackCiphertext(b, p, 1, p.MaxLevel(), "fuzz")
		return err
	})
}
