package ccmm

import (
	"fmt"
	"math"
	"math/big"

	"encmatch/core/base/errs"

	"github.com/tuneinsight/lattigo/v6/ring"
)

// QueryPublicKey is the shared-a public key of the query secrets, ring N_q
// modulo Q: one uniform a and, for each query secret s_t,
// b_t = -a * s_t + e_t. Both are kept in the NTT domain.
type QueryPublicKey struct {
	A ring.Poly
	B []ring.Poly
}

// GenQueryPublicKey derives the query public key from the secrets (the
// key holder runs it once and publishes the result).
func (p *Params) GenQueryPublicKey(sk *Secrets) (*QueryPublicKey, error) {
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
	pk := &QueryPublicKey{A: r.NewPoly()}
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
func (p *Params) EncryptQueryPK(pk *QueryPublicKey, m IntMat) (*SharedA, error) {
	if pk == nil || len(pk.B) != p.Lit.Inner/p.NQ {
		return nil, fmt.Errorf("%w: query public key with the wrong number of blocks", errs.ErrMismatch)
	}
	if m.Rows != p.Lit.Inner {
		return nil, fmt.Errorf("%w: query of %d rows, inner dimension is %d", errs.ErrInvalid, m.Rows, p.Lit.Inner)
	}
	if err := p.checkEntries(m, p.Lit.MaxAbsQuery, "query"); err != nil {
		return nil, err
	}
	r := p.Query.RingQ().AtLevel(len(p.Q) - 1)
	n := p.NQ
	prng, err := newKeyedPRNG()
	if err != nil {
		return nil, err
	}
	xs, err := ring.NewSampler(prng, r, p.Query.Xs(), false)
	if err != nil {
		return nil, err
	}
	gauss, err := ring.NewSampler(prng, r, p.Query.Xe(), false)
	if err != nil {
		return nil, err
	}
	moduli := append([]uint64(nil), p.Q...)
	ct := &SharedA{LogN: p.Lit.LogNQ, Rows: m.Rows, Cols: m.Cols, Moduli: moduli, Scale: new(big.Int).SetUint64(p.Delta)}
	for range moduli {
		ct.A = append(ct.A, NewMat(n, m.Cols))
		ct.B = append(ct.B, NewMat(m.Rows, m.Cols))
	}
	u, a, b, msg := r.NewPoly(), r.NewPoly(), r.NewPoly(), r.NewPoly()
	scale := new(big.Int).SetUint64(p.Delta)
	for j := 0; j < m.Cols; j++ {
		xs.Read(u)
		r.NTT(u, u)
		r.MForm(u, u)
		r.MulCoeffsMontgomery(pk.A, u, a)
		r.INTT(a, a)
		gauss.ReadAndAdd(a)
		putCols(ct.A, moduli, []ring.Poly{a}, 0, j)
		for t := range pk.B {
			r.MulCoeffsMontgomery(pk.B[t], u, b)
			r.INTT(b, b)
			gauss.ReadAndAdd(b)
			for i, q := range moduli {
				for k := 0; k < n; k++ {
					msg.Coeffs[i][k] = modInt(m.Data[(t*n+k)*m.Cols+j], q)
				}
			}
			r.MulScalarBigint(msg, scale, msg)
			r.Add(b, msg, b)
			putCols(ct.B, moduli, []ring.Poly{b}, t*n, j)
		}
	}
	return ct, nil
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
