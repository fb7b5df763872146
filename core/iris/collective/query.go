package collective

import (
	"fmt"

	"encmatch/core/base/errs"
	"encmatch/core/iris/ccmm"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/multiparty"
)

// NewQueryShares draws a party's additive shares of the CCMM's query
// secrets (one per block of N_q positions) with Lattigo's key generator,
// as ccmm.GenKeys draws one holder's. The query secrets are the sums of
// every party's shares; no one needs them whole to query or to match.
func NewQueryShares(cp *ccmm.Params) ccmm.Keys {
	return ccmm.GenKeys(cp.Query, cp.Lit.Inner/cp.NQ)
}

// QueryKeyGen runs Lattigo's collective public-key protocol (CKG) for
// the query secrets: one common a, drawn from the setup's seed, and for
// each query secret the sum of the parties' b-shares -a s_i + e_i. The
// result is a ccmm.QueryPublicKey, which queriers use unchanged
// (ccmm.Params.EncryptQueryPK): the key of the summed secrets, with n
// times the error variance of one holder's.
type QueryKeyGen struct {
	cp    *ccmm.Params
	atQ   rlwe.Parameters // the query ring modulo Q, where the public key lives
	proto multiparty.PublicKeyGenProtocol
	crp   multiparty.PublicKeyGenCRP
}

// NewQueryKeyGen prepares the protocol for the CCMM parameters cp, made
// for the number of parties (ccmm.Literal.QueryShares, which the noise
// bounds take), and the setup's common reference seed (the same bytes at
// every party).
func NewQueryKeyGen(cp *ccmm.Params, seed []byte) (*QueryKeyGen, error) {
	if cp.Lit.QueryShares < 2 {
		return nil, fmt.Errorf("%w: CCMM parameters for one key holder's query secrets (QueryShares %d): nothing to make collectively", errs.ErrInvalid, cp.Lit.QueryShares)
	}
	crs, err := crsFor(seed, "query-public-key")
	if err != nil {
		return nil, err
	}
	atQ, err := rlwe.NewParametersFromLiteral(rlwe.ParametersLiteral{LogN: cp.Lit.LogNQ, Q: cp.Q, NTTFlag: true, Xe: cp.Query.Xe()})
	if err != nil {
		return nil, fmt.Errorf("%w: query ring: %v", errs.ErrInvalid, err)
	}
	g := &QueryKeyGen{cp: cp, atQ: atQ, proto: multiparty.NewPublicKeyGenProtocol(atQ)}
	g.crp = g.proto.SampleCRP(crs)
	return g, nil
}

// Share computes a party's b-share for each of its query secret shares.
func (g *QueryKeyGen) Share(secrets ccmm.Keys) ([]multiparty.PublicKeyGenShare, error) {
	if want := g.cp.Lit.Inner / g.cp.NQ; len(secrets) != want {
		return nil, fmt.Errorf("%w: %d query secret shares, the parameters have %d query secrets", errs.ErrInvalid, len(secrets), want)
	}
	out := make([]multiparty.PublicKeyGenShare, len(secrets))
	for t, s := range secrets {
		out[t] = g.proto.AllocateShare()
		g.proto.GenShare(s, g.crp, &out[t])
	}
	return out, nil
}

// Combine adds every party's shares (shares[i] is party i's, one per
// query secret; exactly QueryShares parties, the count the parameters'
// noise bounds assume) into the query public key, in ccmm's form (the NTT
// domain, not Montgomery's, where Lattigo keeps its keys).
func (g *QueryKeyGen) Combine(shares [][]multiparty.PublicKeyGenShare) (*ccmm.QueryPublicKey, error) {
	if n := g.cp.Lit.QueryShares; len(shares) != n {
		return nil, fmt.Errorf("%w: %d parties' shares, the parameters take %d", errs.ErrInvalid, len(shares), n)
	}
	blocks := g.cp.Lit.Inner / g.cp.NQ
	rq := g.atQ.RingQ()
	pk := &ccmm.QueryPublicKey{A: rq.NewPoly()}
	rq.IMForm(g.crp.Value.Q, pk.A)
	for t := range blocks {
		sum := g.proto.AllocateShare()
		for i, s := range shares {
			if len(s) != blocks {
				return nil, fmt.Errorf("%w: party %d sent %d shares for %d query secrets", errs.ErrInvalid, i, len(s), blocks)
			}
			g.proto.AggregateShares(sum, s[t], &sum)
		}
		b := rq.NewPoly()
		rq.IMForm(sum.Value.Q, b)
		pk.B = append(pk.B, b)
	}
	return pk, nil
}
