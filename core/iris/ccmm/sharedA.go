package ccmm

import (
	"crypto/rand"
	"fmt"
	"math"
	"math/big"
	"runtime"
	"sync"

	"encmatch/core/base/errs"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/utils/sampling"
)

// SharedA is the shared-a (MSRLWE) encryption of a Rows x Cols integer
// matrix M in ring degree N: column j of M is cut into Rows/N blocks of N
// consecutive entries; the blocks of a column share one uniform polynomial
// a_j, and block t is encrypted under secret s_t:
//
//	b_{t,j} = -a_j * s_t + e_{t,j} + Scale * m_{t,j}   in Z_Q[X]/(X^N+1).
//
// As matrices: B = -S*A + Scale*M + E, with A the N x Cols matrix of the
// a_j, B the Rows x Cols matrix of the b_{t,j} and S the Rows x N stack of
// the negacyclic matrices of the s_t. Both are stored as residues modulo
// each prime of Moduli (A[i], B[i] for prime i): the GEMM operands.
//
// A database's A is derived from a public Seed (its a_j drawn from a
// keyed PRNG, seededA): its binary form then holds the seed instead of A,
// half of one block's bytes, and readers regenerate A.
type SharedA struct {
	LogN       int
	Rows, Cols int
	Moduli     []uint64
	Scale      *big.Int
	Seed       []byte // nil: A drawn from a private PRNG and stored
	A, B       []Mat
}

// Columns returns the matrix of c's columns cols, in that order (a copy).
// The result has no seed: its A is stored, since its columns are no longer
// the seed's.
func (c *SharedA) Columns(cols []int) (*SharedA, error) {
	if len(cols) == 0 {
		return nil, fmt.Errorf("%w: no columns selected", errs.ErrInvalid)
	}
	for _, j := range cols {
		if j < 0 || j >= c.Cols {
			return nil, fmt.Errorf("%w: column %d of a matrix of %d", errs.ErrInvalid, j, c.Cols)
		}
	}
	pick := func(m Mat) Mat {
		out := NewMat(m.Rows, len(cols))
		for r := 0; r < m.Rows; r++ {
			src, dst := m.Data[r*m.Cols:(r+1)*m.Cols], out.Data[r*len(cols):(r+1)*len(cols)]
			for k, j := range cols {
				dst[k] = src[j]
			}
		}
		return out
	}
	out := &SharedA{LogN: c.LogN, Rows: c.Rows, Cols: len(cols), Moduli: c.Moduli, Scale: c.Scale}
	for i := range c.Moduli {
		out.A, out.B = append(out.A, pick(c.A[i])), append(out.B, pick(c.B[i]))
	}
	return out, nil
}

// N is the ring degree.
func (c *SharedA) N() int { return 1 << c.LogN }

// Keys holds the secrets of one ring: Keys[t] encrypts block t.
type Keys []*rlwe.SecretKey

// GenKeys generates n secrets with Lattigo's key generator for the given
// parameters (uniform ternary, NTT and Montgomery form, over all primes).
func GenKeys(par rlwe.Parameters, n int) Keys {
	kg := rlwe.NewKeyGenerator(par)
	out := make(Keys, n)
	for i := range out {
		out[i] = kg.GenSecretKeyNew()
	}
	return out
}

// plainFunc gives the residue modulo moduli[i] of the plaintext entry
// (row, col).
type plainFunc func(i, row, col int) uint64

// encryptSharedA encrypts rows x cols entries given by plain with scale
// under keys (one per block of N rows) in ring par at modulus moduli (a
// prefix of par's primes). With a seed, the a_j are derived from it
// (seededA), column j being column col0 + j of the seeded matrix.
func encryptSharedA(par rlwe.Parameters, keys Keys, level int, rows, cols int, plain plainFunc, scale *big.Int, seed []byte, col0 int) (*SharedA, error) {
	r := par.RingQ().AtLevel(level)
	n := r.N()
	if rows%n != 0 || rows/n != len(keys) {
		return nil, fmt.Errorf("%w: %d rows need %d secrets of ring degree %d, have %d", errs.ErrInvalid, rows, (rows+n-1)/n, n, len(keys))
	}
	moduli := append([]uint64(nil), r.ModuliChain()[:level+1]...)
	ct := &SharedA{LogN: r.LogN(), Rows: rows, Cols: cols, Moduli: moduli, Scale: new(big.Int).Set(scale), Seed: seed}
	var seeded *seededA
	if seed != nil {
		var err error
		if seeded, err = newSeededA(seed, n, moduli); err != nil {
			return nil, err
		}
	}
	for range moduli {
		ct.A = append(ct.A, NewMat(n, cols))
		ct.B = append(ct.B, NewMat(rows, cols))
	}
	// Columns are independent: GOMAXPROCS workers, each with its own
	// samplers and buffers (Lattigo's samplers are not safe for concurrent
	// use). Each worker draws from two keyed PRNGs (Lattigo's BLAKE2b XOF)
	// with fresh 256-bit keys from crypto/rand: one for the a's (unless
	// they come from the seed), one for the errors (secret).
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	workers := max(1, min(runtime.GOMAXPROCS(0), (cols+tile-1)/tile))
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			if err := encryptColumns(par, r, keys, ct, plain, scale, seeded, col0, w, workers); err != nil {
				mu.Lock()
				firstErr = err
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return ct, nil
}

// encryptColumns encrypts the tiles of columns w, w+step, w+2*step, ...
// of ct (their a_j from seeded, at column col0 + j, when not nil).
func encryptColumns(par rlwe.Parameters, r *ring.Ring, keys Keys, ct *SharedA, plain plainFunc, scale *big.Int, seeded *seededA, col0, w, step int) error {
	readA := func(j int, a ring.Poly) { seeded.poly(col0+j, a) }
	if seeded == nil {
		prngA, err := newKeyedPRNG()
		if err != nil {
			return err
		}
		uni, err := ring.NewSampler(prngA, r, ring.Uniform{}, false)
		if err != nil {
			return err
		}
		readA = func(_ int, a ring.Poly) { uni.Read(a) }
	}
	prngE, err := newKeyedPRNG()
	if err != nil {
		return err
	}
	gauss, err := ring.NewSampler(prngE, r, par.Xe(), false)
	if err != nil {
		return err
	}
	n, moduli := r.N(), ct.Moduli
	as, aNTT, ms := newPolys(r, tile), newPolys(r, tile), newPolys(r, tile)
	bs := make([][]ring.Poly, len(keys))
	for t := range bs {
		bs[t] = newPolys(r, tile)
	}
	for j0 := w * tile; j0 < ct.Cols; j0 += step * tile {
		nc := min(tile, ct.Cols-j0)
		for c := 0; c < nc; c++ {
			readA(j0+c, as[c])
			r.NTT(as[c], aNTT[c])
		}
		for t := range keys {
			// The plaintext is read row by row across the tile's columns
			// (row-major sources stay in cache).
			for i := range moduli {
				for k := 0; k < n; k++ {
					for c := 0; c < nc; c++ {
						ms[c].Coeffs[i][k] = plain(i, t*n+k, j0+c)
					}
				}
			}
			for c := 0; c < nc; c++ {
				b := bs[t][c]
				r.MulCoeffsMontgomery(aNTT[c], keys[t].Value.Q, b)
				r.INTT(b, b)
				r.Neg(b, b)
				gauss.ReadAndAdd(b)
				r.MulScalarBigint(ms[c], scale, ms[c])
				r.Add(b, ms[c], b)
			}
		}
		putCols(ct.A, moduli, as[:nc], 0, j0)
		for t := range keys {
			putCols(ct.B, moduli, bs[t][:nc], t*n, j0)
		}
	}
	return nil
}

// tile is the number of columns read or written together: 16 int32
// residues fill one 64-byte cache line of a row-major matrix.
const tile = 16

func newPolys(r *ring.Ring, k int) []ring.Poly {
	ps := make([]ring.Poly, k)
	for i := range ps {
		ps[i] = r.NewPoly()
	}
	return ps
}

// putCols writes polys (coefficient domain) into columns j0, j0+1, ...,
// rows [row0, row0+N) of the residue matrices, row by row.
func putCols(ms []Mat, moduli []uint64, ps []ring.Poly, row0, j0 int) {
	for i, q := range moduli {
		m := ms[i]
		for k := 0; k < ps[0].N(); k++ {
			row := m.Data[(row0+k)*m.Cols+j0 : (row0+k)*m.Cols+j0+len(ps)]
			for c := range row {
				row[c] = center(ps[c].Coeffs[i][k], q)
			}
		}
	}
}

// getCols reads columns j0, j0+1, ..., rows [row0, row0+N) of the residue
// matrices into polys, row by row.
func getCols(ms []Mat, moduli []uint64, ps []ring.Poly, row0, j0 int) {
	for i, q := range moduli {
		m := ms[i]
		for k := 0; k < ps[0].N(); k++ {
			row := m.Data[(row0+k)*m.Cols+j0 : (row0+k)*m.Cols+j0+len(ps)]
			for c, v := range row {
				ps[c].Coeffs[i][k] = Uncenter(v, q)
			}
		}
	}
}

func newKeyedPRNG() (sampling.PRNG, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	return sampling.NewKeyedPRNG(key)
}

// forPhase calls f with B + S*A (the scaled plaintext plus noise) of
// every block t of every column j, as a polynomial modulo ct.Moduli.
func forPhase(par rlwe.Parameters, keys Keys, ct *SharedA, f func(r *ring.Ring, ph ring.Poly, t, j int)) error {
	level := len(ct.Moduli) - 1
	if ct.LogN != par.LogN() || level > par.MaxLevel() {
		return fmt.Errorf("%w: ciphertext of ring 2^%d and %d primes, keys of ring 2^%d and %d primes", errs.ErrMismatch, ct.LogN, level+1, par.LogN(), par.MaxLevel()+1)
	}
	for i, q := range ct.Moduli {
		if par.RingQ().ModuliChain()[i] != q {
			return fmt.Errorf("%w: ciphertext prime %d is %d, keys have %d", errs.ErrMismatch, i, q, par.RingQ().ModuliChain()[i])
		}
	}
	r := par.RingQ().AtLevel(level)
	n := r.N()
	if ct.Rows != n*len(keys) {
		return fmt.Errorf("%w: %d rows, %d secrets of degree %d", errs.ErrMismatch, ct.Rows, len(keys), n)
	}
	as, bs, tmp := newPolys(r, tile), newPolys(r, tile), r.NewPoly()
	for j0 := 0; j0 < ct.Cols; j0 += tile {
		nc := min(tile, ct.Cols-j0)
		getCols(ct.A, ct.Moduli, as[:nc], 0, j0)
		for c := 0; c < nc; c++ {
			r.NTT(as[c], as[c])
		}
		for t := range keys {
			getCols(ct.B, ct.Moduli, bs[:nc], t*n, j0)
			for c := 0; c < nc; c++ {
				r.MulCoeffsMontgomery(as[c], keys[t].Value.Q, tmp)
				r.INTT(tmp, tmp)
				r.Add(tmp, bs[c], tmp)
				f(r, tmp, t, j0+c)
			}
		}
	}
	return nil
}

// centered returns the representative in (-Q/2, Q/2] of every
// coefficient of p: exactly, from the first residue when every other
// residue agrees with it (then |x| < q_0/2 and CRT makes it the only
// candidate), else through big integers.
func centered(r *ring.Ring, p ring.Poly, out []*big.Int) {
	moduli := r.ModuliChain()[:r.Level()+1]
	var slow []int
	for k := 0; k < r.N(); k++ {
		x := int64(center(p.Coeffs[0][k], moduli[0]))
		ok := true
		for i := 1; i < len(moduli); i++ {
			if modInt(x, moduli[i]) != p.Coeffs[i][k] {
				ok = false
				break
			}
		}
		if ok {
			out[k] = big.NewInt(x)
		} else {
			slow = append(slow, k)
		}
	}
	if len(slow) > 0 {
		all := make([]*big.Int, r.N())
		for k := range all {
			all[k] = new(big.Int)
		}
		r.PolyToBigintCentered(p, 1, all)
		for _, k := range slow {
			out[k] = all[k]
		}
	}
}

// smallMax returns max |x| over the coefficients of p when every one is
// below q_0/2 in absolute value (the exact test of centered), else false.
func smallMax(r *ring.Ring, p ring.Poly) (float64, bool) {
	moduli := r.ModuliChain()[:r.Level()+1]
	var w int64
	for k := 0; k < r.N(); k++ {
		x := int64(center(p.Coeffs[0][k], moduli[0]))
		for i := 1; i < len(moduli); i++ {
			if modInt(x, moduli[i]) != p.Coeffs[i][k] {
				return 0, false
			}
		}
		w = max(w, x, -x)
	}
	return float64(w), true
}

// Decrypt returns round((B + S*A) / Scale) as an integer matrix.
func Decrypt(par rlwe.Parameters, keys Keys, ct *SharedA) (IntMat, error) {
	out := NewIntMat(ct.Rows, ct.Cols)
	half := new(big.Int).Rsh(ct.Scale, 1)
	vals := make([]*big.Int, 1<<ct.LogN)
	var bad error
	err := forPhase(par, keys, ct, func(r *ring.Ring, ph ring.Poly, t, j int) {
		centered(r, ph, vals)
		for k, v := range vals {
			// round to nearest: floor((v + scale/2) / scale)
			x := v.Add(v, half)
			x.Div(x, ct.Scale)
			if !x.IsInt64() {
				bad = fmt.Errorf("%w: decrypted value %v out of range", errs.ErrCorrupt, x)
			}
			out.Data[(t*r.N()+k)*ct.Cols+j] = x.Int64()
		}
	})
	if err == nil {
		err = bad
	}
	return out, err
}

// Noise returns the largest |B + S*A - Scale*want| over all entries, as a
// float64: the noise of ct against the plaintext model want.
func Noise(par rlwe.Parameters, keys Keys, ct *SharedA, want IntMat) (float64, error) {
	if want.Rows != ct.Rows || want.Cols != ct.Cols {
		return 0, fmt.Errorf("%w: model %dx%d, ciphertext %dx%d", errs.ErrInvalid, want.Rows, want.Cols, ct.Rows, ct.Cols)
	}
	worst := 0.0
	vals := make([]*big.Int, 1<<ct.LogN)
	var m ring.Poly
	err := forPhase(par, keys, ct, func(r *ring.Ring, ph ring.Poly, t, j int) {
		if m.N() == 0 {
			m = r.NewPoly()
		}
		n := r.N()
		for i, q := range ct.Moduli {
			for k := 0; k < n; k++ {
				m.Coeffs[i][k] = modInt(want.Data[(t*n+k)*want.Cols+j], q)
			}
		}
		r.MulScalarBigint(m, ct.Scale, m)
		r.Sub(ph, m, ph)
		if w, ok := smallMax(r, ph); ok {
			worst = math.Max(worst, w)
			return
		}
		centered(r, ph, vals)
		for _, v := range vals {
			f, _ := new(big.Float).SetInt(v).Float64()
			worst = math.Max(worst, math.Abs(f))
		}
	})
	return worst, err
}

// Encrypt encrypts an integer matrix (rows a multiple of par's ring degree,
// one secret of keys per block of N rows) in shared-a format modulo the
// first level+1 primes of par, with the given scale.
func Encrypt(par rlwe.Parameters, keys Keys, level int, m IntMat, scale *big.Int) (*SharedA, error) {
	if level < 0 || level > par.MaxLevel() {
		return nil, fmt.Errorf("%w: level %d of %d", errs.ErrInvalid, level, par.MaxLevel())
	}
	return encryptSharedA(par, keys, level, m.Rows, m.Cols, matrixPlain(m, par.RingQ().ModuliChain(), 0), scale, nil, 0)
}

// SubScaled subtracts f(row, col) from every entry of the message: the b
// coefficient of entry (row, col) loses round(Scale * f(row, col)), so
// that the ciphertext decrypts to M - f up to 1/(2 Scale). Scale * |f| must
// stay below 2^62.
func (c *SharedA) SubScaled(f func(row, col int) float64) error {
	scale, _ := new(big.Float).SetInt(c.Scale).Float64()
	for row := 0; row < c.Rows; row++ {
		for col := 0; col < c.Cols; col++ {
			v := math.Round(scale * f(row, col))
			if math.IsNaN(v) || math.Abs(v) >= 1<<62 {
				return fmt.Errorf("%w: offset %v at (%d, %d) out of range", errs.ErrInvalid, f(row, col), row, col)
			}
			x := int64(v)
			for i, q := range c.Moduli {
				e := &c.B[i].Data[row*c.Cols+col]
				*e = center(modInt(int64(*e)-x, q), q)
			}
		}
	}
	return nil
}
