// Package keystream is the AES-256 counter-mode key stream from which the
// project's public uniform polynomials are sampled: the seeded halves of
// face ciphertexts (face/seeded) and the seeded a-part of an iris database
// (iris/ccmm). Lattigo's own samplers (ring.UniformSampler) read it as
// their sampling.PRNG; only the source of random bytes differs from
// Lattigo's keyed BLAKE2b PRNG, which is 3 to 6 times slower on the hosts
// this project runs on (Go's crypto/aes is hardware accelerated), and
// servers regenerate these polynomials on every query.
//
// A stream is fixed by its key (a public 32-byte seed) and its initial
// counter block; callers put the polynomial's index in the counter block's
// high bytes so that distinct polynomials read disjoint streams (the low
// bytes count the stream's blocks).
package keystream

import (
	"crypto/aes"
	"crypto/cipher"
)

// Stream is an AES-256-CTR key stream as a sampling.PRNG.
type Stream struct{ ctr cipher.Stream }

// New returns the key stream of block (an AES-256 cipher) from the
// initial counter block iv.
func New(block cipher.Block, iv [aes.BlockSize]byte) Stream {
	return Stream{cipher.NewCTR(block, iv[:])}
}

// Read fills p with the stream's next len(p) bytes; it never fails.
func (s Stream) Read(p []byte) (int, error) {
	clear(p)
	s.ctr.XORKeyStream(p, p)
	return len(p), nil
}
