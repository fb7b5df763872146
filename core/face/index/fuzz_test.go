package index

import (
	"bytes"
	"encmatch/core/internal/fuzzpatch"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"encmatch/core/base/codec"
	"encmatch/core/base/comparator"
	"encmatch/core/base/errs"
	"encmatch/core/base/params"
	"encmatch/core/face/keys"
	"encmatch/core/face/seeded"
	"encmatch/core/face/strategy"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// validManifest is the JSON of a consistent manifest of the toy preset
// with two groups.
func validManifest(t testing.TB) []byte {
	set, err := keys.ParamSet(params.Toy, params.MinKappa, 4)
	if err != nil {
		t.Fatal(err)
	}
	m := &Manifest{Format: formatV1, Strategy: strategy.BSGSTBE, N1: 2, KeyID: "0011", Fingerprint: set.Fingerprint(),
		Params: set.Describe(), Delta: 0.5, ScoreScale: comparator.DefaultScoreScale, Count: 5,
		Groups: []Group{{File: groupFile(0, 0), Start: 0, Count: 3, Bytes: 100}, {File: groupFile(1, 0), Start: 3, Count: 2, Bytes: 100, Seeded: true}},
		UID:    "00"}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseManifest(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzParseManifest feeds arbitrary JSON to the manifest decoder and its
// checks.
func FuzzParseManifest(f *testing.F) {
	f.Add(validManifest(f))
	var filled Manifest
	json.Unmarshal(validManifest(f), &filled)
	filled.Groups[0].Fills, filled.Groups[0].File = 2, groupFile(0, 2)
	fb, _ := json.Marshal(&filled)
	if _, err := ParseManifest(fb); err != nil {
		f.Fatal(err)
	}
	f.Add(fb)
	f.Add([]byte(`{"format":1,"params":{"preset":"toy","kappa":7,"dim":9223372036854775807,"padded_dim":0}}`))
	f.Add([]byte(`{"groups":[{"start":0,"count":-1}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := ParseManifest(b); err != nil && !errors.Is(err, errs.ErrCorrupt) && !errors.Is(err, errs.ErrInvalid) {
			t.Fatalf("error of another kind: %v", err)
		}
	})
}

func TestManifestBounds(t *testing.T) {
	for _, b := range []string{
		`{"format":1,"delta":0.5,"score_scale":0.99,"params":{"preset":"toy","kappa":7,"dim":9223372036854775807,"padded_dim":0}}`,
		`{"format":1,"delta":0.5,"score_scale":0.99,"params":{"preset":"toy","kappa":7,"dim":4,"padded_dim":4},"groups":[{"file":"group-000000.ct","start":0,"count":1000000}],"count":1000000}`,
	} {
		if _, err := ParseManifest([]byte(b)); !errors.Is(err, errs.ErrCorrupt) {
			t.Errorf("%s: %v", b, err)
		}
	}
}

// tinySet is a parameter set far too small to be secure (N = 16, 8 slots,
// block size 2) with encmatch's structure: a group of it is two
// ciphertexts of about 1 KB, so fuzzing the group decoder makes progress.
var tinySet = sync.OnceValue(func() *params.Set {
	p := fuzzpatch.TinyParams()
	return &params.Set{Preset: "tiny", Kappa: params.MinKappa, Dim: 2, CKKS: p, Insecure: true}
})

// tinyGroup is the payload of a valid group of tinySet, stored whole or
// seeded.
func tinyGroup(t testing.TB, seededGroup bool) []byte {
	set := tinySet()
	p := set.CKKS
	sk := rlwe.NewKeyGenerator(p).GenSecretKeyNew()
	var payload []byte
	var seed seeded.Seed
	if seededGroup {
		payload = append(payload, record(seed[:])...)
	}
	for i := 0; i < set.L(); i++ {
		pt := ckks.NewPlaintext(p, p.MaxLevel())
		var ct *rlwe.Ciphertext
		var err error
		if seededGroup {
			ct, err = seeded.NewEncryptor(p, sk).Encrypt(pt, seed, uint64(i))
			ct.Value = ct.Value[:1]
		} else {
			ct, err = rlwe.NewEncryptor(p, sk).EncryptNew(pt)
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := codec.PackCiphertext(ct, p)
		if err != nil {
			t.Fatal(err)
		}
		payload = append(payload, record(b)...)
	}
	if int64(len(payload)) != groupPayload(p, set.L(), 0, seededGroup) {
		t.Fatalf("group payload of %d bytes, expected %d", len(payload), groupPayload(p, set.L(), 0, seededGroup))
	}
	return payload
}

// decodeGroup runs the group decoder (LoadGroup and StreamGroup after
// the frame checks) on a payload.
func decodeGroup(b []byte, seededGroup bool) error {
	set := tinySet()
	g := Group{File: groupFile(0, 0), Count: 1, Seeded: seededGroup}
	n := 0
	err := readRecords(bytes.NewReader(b), int64(len(b)), set, g, 0, 1, false, func(_ int, cts []*rlwe.Ciphertext, _ *Masks) error {
		n += len(cts)
		return nil
	})
	if err == nil && n != set.L() {
		return errors.New("wrong number of diagonals")
	}
	return err
}

func TestTinyGroupsDecode(t *testing.T) {
	for _, s := range []bool{false, true} {
		b := tinyGroup(t, s)
		if err := decodeGroup(b, s); err != nil {
			t.Fatalf("seeded=%v: %v", s, err)
		}
		if err := decodeGroup(b, !s); !errors.Is(err, errs.ErrCorrupt) {
			t.Fatalf("seeded=%v read as seeded=%v: %v", s, !s, err)
		}
	}
}

// FuzzGroupRecords patches a valid group payload of tinySet (whole or
// seeded, 1,642 or 1,166 bytes) at an offset the fuzzer chooses and
// decodes it: records, CRCs, packed ciphertexts, seeds.
func FuzzGroupRecords(f *testing.F) {
	groups := [2][]byte{tinyGroup(f, false), tinyGroup(f, true)}
	f.Add(false, uint16(0), []byte{})
	f.Add(true, uint16(0), []byte{})
	f.Add(false, uint16(3), []byte{0xff, 0xff, 0xff, 0x7f})
	f.Add(true, uint16(60), []byte{0xA5, 1, 2})
	f.Fuzz(func(t *testing.T, seededGroup bool, at uint16, patch []byte) {
		valid := groups[0]
		if seededGroup {
			valid = groups[1]
		}
		err := decodeGroup(fuzzpatch.Patched(valid, int(at), patch), seededGroup)
		if err != nil && !errors.Is(err, errs.ErrCorrupt) {
			t.Fatalf("error of another kind: %v", err)
		}
	})
}
