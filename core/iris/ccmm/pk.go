package ccmm

import (
	"fmt"
	"math"
	"math/big"
	"runtime"

	"encmatch/core/base/errs"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
)

// PublicKey is the shared-a public key of a set of secrets of one ring:
// one uniform a and, for each secret s_t, b_t = -a * s_t + e_t, both in
// the NTT domain. The query secrets' key (ring N_q modulo Q) lets a
// querier encrypt without a secret (EncryptQueryPK); the database blocks'
// key (ring N_db modulo Q*K) lets an enroller encrypt a database's Enc
// (EncryptDBPK) and the query secrets' holders re-randomise their EncS
// contributions (EncSShare).
type PublicKey struct {
	A ring.Poly
	B []ring.Poly
}

// GenQueryPublicKey derives the query public key from the secrets (the
// key holder runs it once and publishes the result).
func (p *Params) GenQueryPublicKey(sk *Secrets) (*PublicKey, error) {
	r := p.Query.RingQ().AtLevel(len(p.Q) - 1)
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
	gauss, err := ring.NewSampler(prngE, r, p.Query.Xe(), false)
	if err != nil {
		return nil, err
	}
	pk := &PublicKey{A: r.NewPoly()}
	uni.Read(pk.A) // uniform: as good in the NTT domain
	for _, s := range sk.Query {
		b := r.NewPoly()
		r.MulCoeffsMontgomery(pk.A, s.Value.Q, b)
		r.Neg(b, b)
		e := r.NewPoly()
		gauss.Read(e)
		r.NTT(e, e)
		r.Add(b, e, b)
		pk.B = append(pk.B, b)
	}
	return pk, nil
}

// EncryptQueryPK encrypts an Inner x d3 query matrix with the public key
// only (the querier holds no secret): for column j, one ternary u_j
// (Lattigo's secret distribution) shared by the blocks keeps the a shared:
//
//	a_j = a*u_j + e0_j,   b_{t,j} = b_t*u_j + e_{t,j} + Delta*m_{t,j}
//
// which decrypts to Delta*m + e_t*u_j + e_{t,j} + e0_j*s_t.
func (p *Params) EncryptQueryPK(pk *PublicKey, m IntMat) (*SharedA, error) {
	if m.Rows != p.Lit.Inner {
		return nil, fmt.Errorf("%w: query of %d rows, inner dimension is %d", errs.ErrInvalid, m.Rows, p.Lit.Inner)
	}
	if err := p.checkEntries(m, p.Lit.MaxAbsQuery, "query"); err != nil {
		return nil, err
	}
	return encryptPK(p.Query, len(p.Q)-1, pk, m.Rows, m.Cols, matrixPlain(m, p.Q, 0), new(big.Int).SetUint64(p.Delta), "query")
}

// encryptPK encrypts rows x cols entries given by plain (nil: zeros) with
// scale under the shared-a public key pk of ring par modulo its first
// level+1 primes, as EncryptQueryPK's formula says: one ternary u_j per
// column, shared by the blocks. The columns are split between GOMAXPROCS
// workers, each with its own samplers on a keyed PRNG with a fresh key
// from crypto/rand.
func encryptPK(par rlwe.Parameters, level int, pk *PublicKey, rows, cols int, plain plainFunc, scale *big.Int, what string) (*SharedA, error) {
	r := par.RingQ().AtLevel(level)
	n := r.N()
	if pk == nil || rows%n != 0 || len(pk.B) != rows/n {
		return nil, fmt.Errorf("%w: %s of %d rows needs a public key of %d blocks of ring degree %d", errs.ErrMismatch, what, rows, rows/n, n)
	}
	for _, x := range append([]ring.Poly{pk.A}, pk.B...) {
		if x.N() != n || x.Level() != level {
			return nil, fmt.Errorf("%w: %s public key of ring degree %d and %d primes, want %d and %d", errs.ErrMismatch, what, x.N(), x.Level()+1, n, level+1)
		}
	}
	moduli := append([]uint64(nil), r.ModuliChain()[:level+1]...)
	ct := &SharedA{LogN: r.LogN(), Rows: rows, Cols: cols, Moduli: moduli, Scale: new(big.Int).Set(scale)}
	for range moduli {
		ct.A = append(ct.A, NewMat(n, cols))
		ct.B = append(ct.B, NewMat(rows, cols))
	}
	workers := max(1, min(runtime.GOMAXPROCS(0), cols))
	errc := make(chan error, workers)
	for w := range workers {
		go func() { errc <- encryptPKColumns(par, r, pk, ct, plain, w, workers) }()
	}
	var first error
	for range workers {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return nil, first
	}
	return ct, nil
}

// encryptPKColumns encrypts columns w, w+step, w+2*step, ... of ct.
func encryptPKColumns(par rlwe.Parameters, r *ring.Ring, pk *PublicKey, ct *SharedA, plain plainFunc, w, step int) error {
	prng, err := newKeyedPRNG()
	if err != nil {
		return err
	}
	xs, err := ring.NewSampler(prng, r, par.Xs(), false)
	if err != nil {
		return err
	}
	gauss, err := ring.NewSampler(prng, r, par.Xe(), false)
	if err != nil {
		return err
	}
	n := r.N()
	u, a, b, msg := r.NewPoly(), r.NewPoly(), r.NewPoly(), r.NewPoly()
	for j := w; j < ct.Cols; j += step {
		xs.Read(u)
		r.NTT(u, u)
		r.MForm(u, u)
		r.MulCoeffsMontgomery(pk.A, u, a)
		r.INTT(a, a)
		gauss.ReadAndAdd(a)
		putCols(ct.A, ct.Moduli, []ring.Poly{a}, 0, j)
		for t := range pk.B {
			r.MulCoeffsMontgomery(pk.B[t], u, b)
			r.INTT(b, b)
			gauss.ReadAndAdd(b)
			if plain != nil {
				for i := range ct.Moduli {
					for k := 0; k < n; k++ {
						msg.Coeffs[i][k] = plain(i, t*n+k, j)
					}
				}
				r.MulScalarBigint(msg, ct.Scale, msg)
				r.Add(b, msg, b)
			}
			putCols(ct.B, ct.Moduli, []ring.Poly{b}, t*n, j)
		}
	}
	return nil
}

// queryNoiseVar is the variance of one coefficient of a fresh query's
// noise: sigma^2 (secret key), or (1 + 4 n N_q / 3) sigma^2 (public key:
// e*u and e0*s over N_q terms with ternary u, s non-zero with probability
// 2/3, plus e'; with n = QueryShares, the key's e has n sigma^2 and s a
// variance of 2 n / 3).
func (p *Params) queryNoiseVar(publicKey bool) float64 {
	if publicKey {
		return (1 + 4*float64(p.Lit.QueryShares)*float64(p.NQ)/3) * p.sigma * p.sigma
	}
	return p.sigma * p.sigma
}

// QueryFreshBound bounds a fresh query's noise: the sampler's truncation
// (secret key), or the smaller of the worst case and Tail standard
// deviations (public key).
func (p *Params) QueryFreshBound(publicKey bool) float64 {
	if !publicKey {
		return p.bound
	}
	worst := (2*float64(p.Lit.QueryShares*p.NQ) + 1) * p.bound
	return math.Min(worst, Tail*math.Sqrt(p.queryNoiseVar(true)))
}
