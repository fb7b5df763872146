// Package fuzzpatch holds what the core's fuzz targets share: a parameter
// set small enough for fuzzing, and the mutation of valid encodings.
//
// A decoder that checks an encoding's exact size first refuses almost every
// raw byte string at once, so a fuzzer fed raw bytes never gets past that
// check. The targets instead take (at, patch) and decode a valid encoding
// patched at an offset: the size is kept, so the fuzzer reaches the length
// fields, the metadata and the coefficients (docs/FUZZ.md).
package fuzzpatch

import (
	"sync"

	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// TinyParams is a CKKS parameter set far too small to be secure (N = 16),
// with the structure of encmatch's (several Q primes, two P primes, two
// key-switching digits): decoders behave on it as at N = 2^15, but a
// ciphertext is about 1 KB and a key a few, so fuzzing makes progress.
var TinyParams = sync.OnceValue(func() ckks.Parameters {
	p, err := ckks.NewParametersFromLiteral(ckks.ParametersLiteral{
		LogN: 4, LogQ: []int{50, 40, 40}, LogP: []int{50, 50}, LogDefaultScale: 40,
	})
	if err != nil {
		panic(err)
	}
	return p
})

// Patched returns valid with patch written at offset at (modulo its
// length), or, when patch starts with 0xA5, valid cut at that offset
// followed by the rest of patch (to try other sizes).
func Patched(valid []byte, at int, patch []byte) []byte {
	if len(patch) > 0 && patch[0] == 0xA5 {
		cut := at % (len(valid) + 1)
		return append(append(make([]byte, 0, cut+len(patch)), valid[:cut]...), patch[1:]...)
	}
	b := append([]byte(nil), valid...)
	if len(b) > 0 {
		copy(b[at%len(b):], patch)
	}
	return b
}
