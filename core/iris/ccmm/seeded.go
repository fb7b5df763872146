package ccmm

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"

	"encmatch/core/base/errs"
	"encmatch/core/base/keystream"

	"github.com/tuneinsight/lattigo/v6/ring"
)

// SeedSize is the length of the public seed a database's a-part is
// derived from (SharedA.Seed).
const SeedSize = 32

// NewSeed returns a fresh seed from crypto/rand. The seed is public (it
// replaces the a-part, which is public); it must be fresh per matrix.
func NewSeed() ([]byte, error) {
	seed := make([]byte, SeedSize)
	if _, err := rand.Read(seed); err != nil {
		return nil, err
	}
	return seed, nil
}

// seededA derives the a-part of a seeded SharedA: the residues of column
// j modulo prime i are Lattigo's uniform sampler (ring.UniformSampler) read
// from AES-256 in counter mode keyed by the seed (package keystream), its
// initial counter block j (64 bits) || i (32 bits) || 0 (32 bits), big
// endian, so that each (column, prime) is its own stream of at most 2^32
// blocks: any column and prime is regenerated alone, in any order and in
// parallel.
// (Lattigo's keyed PRNG, BLAKE2b, took 64 % of a query's regeneration of
// the a-part, about 9 s per prime of 2^28 residues on 2 cores; databases
// seeded that way are refused with a message, codec.go.)
type seededA struct {
	block cipher.Block // AES-256 keyed by the seed
	rings []*ring.Ring // one single-prime ring per modulus (the sampler's modulus and mask)
}

func newSeededA(seed []byte, n int, moduli []uint64) (*seededA, error) {
	if len(seed) != SeedSize {
		return nil, fmt.Errorf("%w: a seed of %d bytes, want %d", errs.ErrInvalid, len(seed), SeedSize)
	}
	block, err := aes.NewCipher(seed)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errs.ErrInvalid, err)
	}
	s := &seededA{block: block}
	for _, q := range moduli {
		r, err := ring.NewRing(n, []uint64{q})
		if err != nil {
			return nil, fmt.Errorf("%w: prime %d in ring degree %d: %v", errs.ErrInvalid, q, n, err)
		}
		s.rings = append(s.rings, r)
	}
	return s, nil
}

// column writes the residues (canonical, in [0, q_i)) of column j modulo
// prime i into dst (N coefficients).
func (s *seededA) column(j, i int, dst []uint64) {
	var iv [aes.BlockSize]byte
	binary.BigEndian.PutUint64(iv[:8], uint64(j))
	binary.BigEndian.PutUint32(iv[8:12], uint32(i))
	ring.NewUniformSampler(keystream.New(s.block, iv), s.rings[i]).Read(ring.Poly{Coeffs: [][]uint64{dst}})
}

// poly writes column j's residues modulo every prime into a (a
// polynomial of the seeded matrix's moduli, coefficient domain).
func (s *seededA) poly(j int, a ring.Poly) {
	for i := range s.rings {
		s.column(j, i, a.Coeffs[i])
	}
}

// fill writes columns col0 .. col0 + m.Cols - 1 of the a-part modulo
// prime i into m (N x m.Cols, centered residues): GOMAXPROCS workers, each
// sampling a tile of columns and writing it row by row (putCols).
func (s *seededA) fill(m Mat, i, col0 int) {
	moduli := []uint64{s.rings[i].SubRings[0].Modulus}
	tiles := (m.Cols + tile - 1) / tile
	workers := max(1, min(runtime.GOMAXPROCS(0), tiles))
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			cols := make([]ring.Poly, tile) // one-prime polynomials
			for c := range cols {
				cols[c] = ring.Poly{Coeffs: [][]uint64{make([]uint64, m.Rows)}}
			}
			for t := w; t < tiles; t += workers {
				j0 := t * tile
				nc := min(tile, m.Cols-j0)
				for c := 0; c < nc; c++ {
					s.column(col0+j0+c, i, cols[c].Coeffs[0])
				}
				putCols([]Mat{m}, moduli, cols[:nc], 0, j0)
			}
		}(w)
	}
	wg.Wait()
}
