package ccmm

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"

	"encmatch/core/base/errs"

	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/utils/sampling"
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
// from Lattigo's keyed BLAKE2b PRNG (sampling.KeyedPRNG) with key seed || j
// || i (64-bit little endian), so that each (column, prime) is its own
// stream: any column and prime is regenerated alone, in any order and in
// parallel.
type seededA struct {
	seed  []byte
	rings []*ring.Ring // one single-prime ring per modulus (the sampler's modulus and mask)
}

func newSeededA(seed []byte, n int, moduli []uint64) (*seededA, error) {
	if len(seed) != SeedSize {
		return nil, fmt.Errorf("%w: a seed of %d bytes, want %d", errs.ErrInvalid, len(seed), SeedSize)
	}
	s := &seededA{seed: seed}
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
	key := make([]byte, 0, SeedSize+16)
	key = append(key, s.seed...)
	key = binary.LittleEndian.AppendUint64(key, uint64(j))
	key = binary.LittleEndian.AppendUint64(key, uint64(i))
	prng, err := sampling.NewKeyedPRNG(key)
	if err != nil {
		panic(err) // BLAKE2b refuses only keys over 64 bytes; this one has 48
	}
	ring.NewUniformSampler(prng, s.rings[i]).Read(ring.Poly{Coeffs: [][]uint64{dst}})
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
