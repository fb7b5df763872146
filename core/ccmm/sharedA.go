package ccmm

import (
	"crypto/rand"
	"fmt"
	"math"
	"math/big"

	"encmatch/core/errs"

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
type SharedA struct {
	LogN       int
	Rows, Cols int
	Moduli     []uint64
	Scale      *big.Int
	A, B       []Mat
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

func intPlain(m IntMat, moduli []uint64) plainFunc {
	return func(i, r, c int) uint64 { return modInt(m.Data[r*m.Cols+c], moduli[i]) }
}

// encryptSharedA encrypts rows x cols entries given by plain with scale
// under keys (one per block of N rows) in ring par at modulus moduli (a
// prefix of par's primes).
func encryptSharedA(par rlwe.Parameters, keys Keys, level int, rows, cols int, plain plainFunc, scale *big.Int) (*SharedA, error) {
	r := par.RingQ().AtLevel(level)
	n := r.N()
	if rows%n != 0 || rows/n != len(keys) {
		return nil, fmt.Errorf("%w: %d rows need %d secrets of ring degree %d, have %d", errs.ErrInvalid, rows, (rows+n-1)/n, n, len(keys))
	}
	// Two keyed PRNGs (Lattigo's BLAKE2b XOF) with fresh 256-bit keys from
	// crypto/rand: one for the a's (a later version may publish its key as
	// the seed that replaces A), one for the errors (secret).
	prngA, err := newKeyedPRNG()
	if err != nil {
		return nil, err
	}
	prngE, err := newKeyedPRNG()
	if err != nil {
		return nil, err
	}
	uni, err := ring.NewSampler(prngA, r, ring.Uniform{}, false)
	if err != nil {
		return nil, err
	}
	gauss, err := ring.NewSampler(prngE, r, par.Xe(), false)
	if err != nil {
		return nil, err
	}
	moduli := append([]uint64(nil), r.ModuliChain()[:level+1]...)
	ct := &SharedA{LogN: r.LogN(), Rows: rows, Cols: cols, Moduli: moduli, Scale: new(big.Int).Set(scale)}
	for range moduli {
		ct.A = append(ct.A, NewMat(n, cols))
		ct.B = append(ct.B, NewMat(rows, cols))
	}
	a, aNTT, b, m := r.NewPoly(), r.NewPoly(), r.NewPoly(), r.NewPoly()
	for j := 0; j < cols; j++ {
		uni.Read(a)
		putCol(ct.A, moduli, a, 0, j)
		r.NTT(a, aNTT)
		for t := range keys {
			r.MulCoeffsMontgomery(aNTT, keys[t].Value.Q, b)
			r.INTT(b, b)
			r.Neg(b, b)
			gauss.ReadAndAdd(b)
			for i := range moduli {
				for k := 0; k < n; k++ {
					m.Coeffs[i][k] = plain(i, t*n+k, j)
				}
			}
			r.MulScalarBigint(m, scale, m)
			r.Add(b, m, b)
			putCol(ct.B, moduli, b, t*n, j)
		}
	}
	return ct, nil
}

func newKeyedPRNG() (sampling.PRNG, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	return sampling.NewKeyedPRNG(key)
}

// putCol writes poly p (coefficient domain) into column col, rows
// [row0, row0+N) of the residue matrices.
func putCol(ms []Mat, moduli []uint64, p ring.Poly, row0, col int) {
	for i, q := range moduli {
		m := ms[i]
		for k, v := range p.Coeffs[i][:p.N()] {
			m.Data[(row0+k)*m.Cols+col] = center(v, q)
		}
	}
}

// getCol reads column col, rows [row0, row0+N) of the residue matrices
// into p.
func getCol(ms []Mat, moduli []uint64, p ring.Poly, row0, col int) {
	for i, q := range moduli {
		m := ms[i]
		for k := range p.Coeffs[i][:p.N()] {
			p.Coeffs[i][k] = uncenter(m.Data[(row0+k)*m.Cols+col], q)
		}
	}
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
	a, b, tmp := r.NewPoly(), r.NewPoly(), r.NewPoly()
	for j := 0; j < ct.Cols; j++ {
		getCol(ct.A, ct.Moduli, a, 0, j)
		r.NTT(a, a)
		for t := range keys {
			r.MulCoeffsMontgomery(a, keys[t].Value.Q, tmp)
			r.INTT(tmp, tmp)
			getCol(ct.B, ct.Moduli, b, t*n, j)
			r.Add(tmp, b, tmp)
			f(r, tmp, t, j)
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
	return encryptSharedA(par, keys, level, m.Rows, m.Cols, intPlain(m, par.RingQ().ModuliChain()), scale)
}
