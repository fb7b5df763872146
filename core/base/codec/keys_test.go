package codec

import (
	"encmatch/core/internal/fuzzpatch"
	"encoding/binary"
	"errors"
	"runtime"
	"sync"
	"testing"

	"encmatch/core/base/errs"
	"encmatch/core/base/params"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

type tinyKeys struct {
	sk     []byte
	pk     []byte
	rlk    []byte
	gk     []byte
	galois uint64
}

var tinyKeySet = sync.OnceValue(func() tinyKeys {
	p := fuzzpatch.TinyParams()
	kgen := rlwe.NewKeyGenerator(p)
	sk, pk := kgen.GenKeyPairNew()
	g := p.GaloisElement(1)
	var out tinyKeys
	out.sk, _ = sk.MarshalBinary()
	out.pk, _ = pk.MarshalBinary()
	out.rlk, _ = kgen.GenRelinearizationKeyNew(sk).MarshalBinary()
	out.gk, _ = kgen.GenGaloisKeyNew(g, sk).MarshalBinary()
	out.galois = g
	return out
})

func TestKeySizesMatchLattigo(t *testing.T) {
	toy, err := params.New(params.Toy, params.MinKappa, 8)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []ckks.Parameters{fuzzpatch.TinyParams(), toy.CKKS} {
		if got, want := SecretKeySize(p), rlwe.NewSecretKey(p).BinarySize(); got != want {
			t.Errorf("secret key: %d, Lattigo %d", got, want)
		}
		if got, want := PublicKeySize(p), rlwe.NewPublicKey(p).BinarySize(); got != want {
			t.Errorf("public key: %d, Lattigo %d", got, want)
		}
		if got, want := RelinearizationKeySize(p), rlwe.NewRelinearizationKey(p).BinarySize(); got != want {
			t.Errorf("relinearisation key: %d, Lattigo %d", got, want)
		}
		if got, want := GaloisKeySize(p), rlwe.NewGaloisKey(p).BinarySize(); got != want {
			t.Errorf("Galois key: %d, Lattigo %d", got, want)
		}
		for _, level := range []int{0, p.MaxLevel()} {
			for degree := 0; degree <= 2; degree++ {
				if got, want := CiphertextSize(p, degree, level), ckks.NewCiphertext(p, degree, level).BinarySize(); got != want {
					t.Errorf("ciphertext degree %d level %d: %d, Lattigo %d", degree, level, got, want)
				}
			}
		}
	}
}

func TestKeyDecodersRoundTrip(t *testing.T) {
	p, k := fuzzpatch.TinyParams(), tinyKeySet()
	if _, err := DecodeSecretKey(k.sk, p, "sk"); err != nil {
		t.Fatal(err)
	}
	if _, err := DecodePublicKey(k.pk, p, "pk"); err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeRelinearizationKey(k.rlk, p, "rlk"); err != nil {
		t.Fatal(err)
	}
	gk, err := DecodeGaloisKey(k.gk, p, "gk")
	if err != nil || gk.GaloisElement != k.galois {
		t.Fatalf("%v %v", err, gk)
	}
	again, _ := gk.MarshalBinary()
	if string(again) != string(k.gk) {
		t.Fatal("Galois key round trip changed the key")
	}
	// Each kind is refused in the place of another (their sizes differ).
	if _, err := DecodeGaloisKey(k.rlk, p, "gk"); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("relinearisation key taken for a Galois key: %v", err)
	}
	if _, err := DecodeSecretKey(k.pk, p, "sk"); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("public key taken for a secret key: %v", err)
	}
}

// TestHugeLengthFieldIsRefusedWithoutAllocating reproduces issue 14's
// attack: one inner length field of a key set to 2^36 (the frame's
// checksum would be recomputed, so only the decoder stands in the way).
// Lattigo would make([]T, 2^36) and the process would die; every length
// field of every key kind, set to 2^36, must be refused with ErrCorrupt
// while allocating little.
func TestHugeLengthFieldIsRefusedWithoutAllocating(t *testing.T) {
	p, k := fuzzpatch.TinyParams(), tinyKeySet()
	type kind struct {
		name   string
		b      []byte
		decode func([]byte) error
	}
	kinds := []kind{
		{"secret", k.sk, func(b []byte) error { _, err := DecodeSecretKey(b, p, "sk"); return err }},
		{"public", k.pk, func(b []byte) error { _, err := DecodePublicKey(b, p, "pk"); return err }},
		{"relin", k.rlk, func(b []byte) error { _, err := DecodeRelinearizationKey(b, p, "rlk"); return err }},
		{"galois", k.gk, func(b []byte) error { _, err := DecodeGaloisKey(b, p, "gk"); return err }},
	}
	for _, kd := range kinds {
		fields := 0
		// Every 8-byte aligned word whose value is a plausible length (1 to
		// 64) is a length field or a coefficient; setting either to 2^36
		// must be refused (a coefficient of 2^36 is reduced at these
		// primes, so only length fields are certain to be refused; we
		// require the refusal for the words the layout reads as lengths).
		for off := 0; off+8 <= len(kd.b); off += 8 {
			v := binary.LittleEndian.Uint64(kd.b[off:])
			if v == 0 || v > 64 {
				continue
			}
			bad := append([]byte(nil), kd.b...)
			binary.LittleEndian.PutUint64(bad[off:], 1<<36)
			var err error
			alloc := allocated(func() { err = kd.decode(bad) })
			if err == nil {
				continue // a coefficient that happened to be small
			}
			fields++
			if !errors.Is(err, errs.ErrCorrupt) {
				t.Fatalf("%s key, field at %d: %v", kd.name, off, err)
			}
			if alloc > 4*uint64(len(kd.b))+1<<16 {
				t.Fatalf("%s key, field at %d: %d bytes allocated to refuse a %d-byte key", kd.name, off, alloc, len(kd.b))
			}
		}
		if fields == 0 {
			t.Fatalf("%s key: no length field found", kd.name)
		}
	}
}

// allocated returns the bytes f allocated on the heap.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestKeyContentIsChecked(t *testing.T) {
	p, k := fuzzpatch.TinyParams(), tinyKeySet()
	bad := append([]byte(nil), k.gk...)
	binary.LittleEndian.PutUint64(bad, 2) // even: not a Galois element
	if _, err := DecodeGaloisKey(bad, p, "gk"); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("even Galois element accepted: %v", err)
	}
	bad = append([]byte(nil), k.gk...)
	binary.LittleEndian.PutUint64(bad[8:], 1<<20) // NthRoot
	if _, err := DecodeGaloisKey(bad, p, "gk"); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("wrong NthRoot accepted: %v", err)
	}
	bad = append([]byte(nil), k.gk...)
	binary.LittleEndian.PutUint64(bad[16:], 3) // BaseTwoDecomposition
	if _, err := DecodeGaloisKey(bad, p, "gk"); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("power-of-two decomposition accepted: %v", err)
	}
	bad = append([]byte(nil), k.pk...)
	binary.LittleEndian.PutUint64(bad[len(bad)-8:], ^uint64(0))
	if _, err := DecodePublicKey(bad, p, "pk"); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("unreduced coefficient accepted: %v", err)
	}
	if _, err := DecodeRelinearizationKey(k.rlk[:len(k.rlk)-1], p, "rlk"); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("truncated key accepted: %v", err)
	}
}

// fuzzPatched fuzzes decode with a valid encoding patched at an offset
// the fuzzer chooses: inputs keep the valid size, so the fuzzer reaches
// the layout and content checks (a raw byte string almost never has the
// exact size). A patch starting with 0xA5 instead truncates the encoding at
// the offset and appends the rest of the patch, to try other sizes.
// decode may only fail with ErrCorrupt (never panic, never another kind).
func fuzzPatched(f *testing.F, valid []byte, decode func([]byte) error) {
	f.Add(uint16(0), []byte{})
	f.Add(uint16(16), []byte{0, 0, 0, 0, 16, 0, 0, 0})
	f.Add(uint16(40), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add(uint16(len(valid)-8), []byte{1})
	f.Add(uint16(100), []byte{0xA5, 1, 2, 3})
	f.Fuzz(func(t *testing.T, at uint16, patch []byte) {
		b := fuzzpatch.Patched(valid, int(at), patch)
		if err := decode(b); err != nil && !errors.Is(err, errs.ErrCorrupt) {
			t.Fatalf("error of another kind: %v", err)
		}
	})
}

func fuzzKey(f *testing.F, valid []byte, decode func([]byte) error) { fuzzPatched(f, valid, decode) }

func FuzzDecodeSecretKey(f *testing.F) {
	p := fuzzpatch.TinyParams()
	fuzzKey(f, tinyKeySet().sk, func(b []byte) error { _, err := DecodeSecretKey(b, p, "fuzz"); return err })
}

func FuzzDecodePublicKey(f *testing.F) {
	p := fuzzpatch.TinyParams()
	fuzzKey(f, tinyKeySet().pk, func(b []byte) error { _, err := DecodePublicKey(b, p, "fuzz"); return err })
}

func FuzzDecodeRelinearizationKey(f *testing.F) {
	p := fuzzpatch.TinyParams()
	fuzzKey(f, tinyKeySet().rlk, func(b []byte) error { _, err := DecodeRelinearizationKey(b, p, "fuzz"); return err })
}

func FuzzDecodeGaloisKey(f *testing.F) {
	p := fuzzpatch.TinyParams()
	fuzzKey(f, tinyKeySet().gk, func(b []byte) error { _, err := DecodeGaloisKey(b, p, "fuzz"); return err })
}
