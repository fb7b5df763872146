// Package seeded is secret-key encryption whose uniform half is derived from
// a public seed, so that only half of each ciphertext needs storing.
//
// An RLWE ciphertext under the secret key s is (c0, c1) = (-a*s + e + m, a)
// with a uniform. When a comes from a seeded generator, storing c0 and the
// seed is enough: the reader regenerates a = c1. Lattigo uses the same idea
// for its compressed evaluation keys and multiparty common reference
// polynomials; here it halves an encrypted gallery on disk and on the wire
// when the enroller owns the secret key (papers/000 App. C counts 155-180 KB
// per 512-d entry with both halves).
//
// The uniform polynomial is Lattigo's ring.UniformSampler reading an
// AES-256-CTR keystream (Go's crypto/aes, hardware accelerated) keyed by a
// 32-byte seed, with the ciphertext's index in the high half of the initial
// counter block. AES-CTR is used rather than Lattigo's blake2b KeyedPRNG
// because a server regenerates tens of thousands of masks per query: at
// N = 2^15 with ten primes a mask takes 2.6-3.4 ms from AES-CTR and 15.3 ms
// from blake2b on this project's 2-core reference machine (BenchmarkMask).
//
// Security: a (seed, index) pair must never encrypt two messages under one
// key, since the difference of two c0 with the same a reveals the difference
// of the messages up to noise. Callers draw a fresh random seed (NewSeed) for
// every batch of ciphertexts and number the ciphertexts of a batch.
//
// EncryptSum re-encrypts what a ciphertext holds plus a new plaintext under
// a fresh seed: the key owner's way to add entries to a stored group while
// keeping one seed per group (docs/STORAGE.md, "Filling the last group").
package seeded

import (
	"crypto/aes"
	"crypto/rand"
	"encoding/binary"
	"fmt"

	"encmatch/core/base/keystream"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/utils/sampling"
)

// SeedSize is the length of a seed in bytes (an AES-256 key).
const SeedSize = 32

// Seed keys the generator of the uniform halves of a batch of ciphertexts.
type Seed [SeedSize]byte

// NewSeed draws a fresh seed from the operating system's random source.
func NewSeed() (Seed, error) {
	var s Seed
	_, err := rand.Read(s[:])
	return s, err
}

// Mask writes into out the uniform polynomial (NTT domain, level of rq)
// that is the c1 of ciphertext number index under seed.
func Mask(rq *ring.Ring, seed Seed, index uint64, out ring.Poly) {
	block, err := aes.NewCipher(seed[:])
	if err != nil {
		panic(err) // unreachable: a 32-byte key is always valid
	}
	var iv [aes.BlockSize]byte
	binary.BigEndian.PutUint64(iv[:8], index) // the low 8 bytes count blocks
	ring.NewUniformSampler(keystream.New(block, iv), rq).Read(out)
}

// Encryptor encrypts under a secret key with seeded uniform halves. It is
// safe for concurrent use.
type Encryptor struct {
	params rlwe.ParameterProvider
	sk     *rlwe.SecretKey
	dec    *rlwe.Decryptor
}

// NewEncryptor returns an encryptor for the secret key sk.
func NewEncryptor(p rlwe.ParameterProvider, sk *rlwe.SecretKey) *Encryptor {
	return &Encryptor{params: p, sk: sk, dec: rlwe.NewDecryptor(p, sk)}
}

// EncryptSum returns a fresh seeded encryption, under (seed, index), of the
// phase of old (its message with its noise, c0 + c1*s, decrypted by
// Lattigo's decryptor) plus pt: (c0', a') with a' = Mask(seed, index) and
// c0' = -a'*s + e' + (c0 + c1*s) + pt. The result decrypts to what old
// plus a fresh encryption of pt would (one more fresh noise e'), and is
// stored like any seeded ciphertext: c0' and the seed. seed must be fresh:
// never the one old was made with (the difference of the two c0 would then
// be e' + pt, the new message in the clear up to noise). old must be in the
// NTT domain at pt's level and scale.
func (e *Encryptor) EncryptSum(old *rlwe.Ciphertext, pt *rlwe.Plaintext, seed Seed, index uint64) (*rlwe.Ciphertext, error) {
	if !old.IsNTT || !pt.IsNTT || old.Level() != pt.Level() || old.Scale.Cmp(pt.Scale) != 0 {
		return nil, fmt.Errorf("seeded re-encryption needs a ciphertext and a plaintext in the NTT domain at one level and scale (levels %d, %d)", old.Level(), pt.Level())
	}
	sum := e.dec.DecryptNew(old) // NTT domain: the decryptor uses no shared buffer
	e.params.GetRLWEParameters().RingQ().AtLevel(pt.Level()).Add(sum.Value, pt.Value, sum.Value)
	return e.Encrypt(sum, seed, index)
}

// Encrypt returns (c0, c1) = (-a*s + e + pt, a) with a = Mask(seed, index)
// at the plaintext's level; pt must be in the NTT domain (as CKKS encodes
// it). The error e is sampled from the parameters' error distribution with
// the operating system's random source, exactly as Lattigo's secret-key
// encryption does.
func (e *Encryptor) Encrypt(pt *rlwe.Plaintext, seed Seed, index uint64) (*rlwe.Ciphertext, error) {
	if !pt.IsNTT {
		return nil, fmt.Errorf("seeded encryption needs a plaintext in the NTT domain")
	}
	p := e.params.GetRLWEParameters()
	rq := p.RingQ().AtLevel(pt.Level())
	ct := rlwe.NewCiphertext(p, 1, pt.Level())
	*ct.MetaData = *pt.MetaData
	Mask(rq, seed, index, ct.Value[1])

	prng, err := sampling.NewPRNG()
	if err != nil {
		return nil, err
	}
	noise, err := ring.NewSampler(prng, rq, p.Xe(), false)
	if err != nil {
		return nil, err
	}
	c0 := ct.Value[0]
	noise.Read(c0)
	rq.NTT(c0, c0)
	// sk is stored in the Montgomery domain, so this subtracts a*s.
	rq.MulCoeffsMontgomeryThenSub(ct.Value[1], e.sk.Value.Q, c0)
	rq.Add(c0, pt.Value, c0)
	return ct, nil
}
