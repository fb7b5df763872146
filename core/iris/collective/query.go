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

// PublicKeyGen runs Lattigo's collective public-key protocol (CKG) for a
// set of shared-a secrets: one common a, drawn from the setup's seed, and
// for each secret the sum of the parties' b-shares -a s_i + e_i. The
// result is a ccmm.PublicKey of the summed secrets, with n times the
// error variance of one holder's: the query secrets' key, which queriers
// use unchanged (ccmm.Params.EncryptQueryPK), or the database blocks'
// key, with which an enroller encrypts a database (EncryptDBPK) and the
// query-share holders re-randomise their EncS contributions (EncSShare).
type PublicKeyGen struct {
	par     rlwe.Parameters // the ring and modulus where the key lives
	what    string
	secrets int // the number of secrets (one b each)
	parties int // the number of parties whose shares the parameters' bounds assume
	proto   multiparty.PublicKeyGenProtocol
	crp     multiparty.PublicKeyGenCRP
}

// NewQueryKeyGen prepares the protocol for the query secrets (ring N_q
// modulo Q) of the CCMM parameters cp, made for the number of parties
// (ccmm.Literal.QueryShares, which the noise bounds take), on the setup's
// common reference seed (the same bytes at every party).
func NewQueryKeyGen(cp *ccmm.Params, seed []byte) (*PublicKeyGen, error) {
	if cp.Lit.QueryShares < 2 {
		return nil, fmt.Errorf("%w: CCMM parameters for one key holder's query secrets (QueryShares %d): nothing to make collectively", errs.ErrInvalid, cp.Lit.QueryShares)
	}
	atQ, err := rlwe.NewParametersFromLiteral(rlwe.ParametersLiteral{LogN: cp.Lit.LogNQ, Q: cp.Q, NTTFlag: true, Xe: cp.Query.Xe()})
	if err != nil {
		return nil, fmt.Errorf("%w: query ring: %v", errs.ErrInvalid, err)
	}
	return newPublicKeyGen(atQ, "query secret", cp.Lit.Inner/cp.NQ, cp.Lit.QueryShares, seed, "query-public-key")
}

// NewDBKeyGen prepares the protocol for the secrets of a database's
// blocks (ring N_db modulo Q*K; blocks of N_db codes each) under the CCMM
// parameters cp, made for ccmm.Literal.DBShares parties, on the setup's
// common reference seed. All blocks share one a, as the database's
// shared-a format needs.
func NewDBKeyGen(cp *ccmm.Params, seed []byte, blocks int) (*PublicKeyGen, error) {
	if cp.Lit.DBShares < 2 {
		return nil, fmt.Errorf("%w: CCMM parameters for one key holder's database secrets (DBShares %d): nothing to make collectively", errs.ErrInvalid, cp.Lit.DBShares)
	}
	if blocks < 1 {
		return nil, fmt.Errorf("%w: a database of %d blocks", errs.ErrInvalid, blocks)
	}
	return newPublicKeyGen(cp.DB, "database secret", blocks, cp.Lit.DBShares, seed, "database-public-key")
}

func newPublicKeyGen(par rlwe.Parameters, what string, secrets, parties int, seed []byte, label string) (*PublicKeyGen, error) {
	crs, err := crsFor(seed, label)
	if err != nil {
		return nil, err
	}
	g := &PublicKeyGen{par: par, what: what, secrets: secrets, parties: parties, proto: multiparty.NewPublicKeyGenProtocol(par)}
	g.crp = g.proto.SampleCRP(crs)
	return g, nil
}

// Share computes a party's b-share for each of its secret shares.
func (g *PublicKeyGen) Share(secrets ccmm.Keys) ([]multiparty.PublicKeyGenShare, error) {
	if len(secrets) != g.secrets {
		return nil, fmt.Errorf("%w: %d %s shares, the key has %d secrets", errs.ErrInvalid, len(secrets), g.what, g.secrets)
	}
	out := make([]multiparty.PublicKeyGenShare, len(secrets))
	for t, s := range secrets {
		out[t] = g.proto.AllocateShare()
		g.proto.GenShare(s, g.crp, &out[t])
	}
	return out, nil
}

// Combine adds every party's shares (shares[i] is party i's, one per
// secret; exactly as many parties as the parameters' noise bounds assume)
// into the public key, in ccmm's form (the NTT domain, not Montgomery's,
// where Lattigo keeps its keys).
func (g *PublicKeyGen) Combine(shares [][]multiparty.PublicKeyGenShare) (*ccmm.PublicKey, error) {
	if len(shares) != g.parties {
		return nil, fmt.Errorf("%w: %d parties' shares, the parameters take %d", errs.ErrInvalid, len(shares), g.parties)
	}
	rq := g.par.RingQ()
	pk := &ccmm.PublicKey{A: rq.NewPoly()}
	rq.IMForm(g.crp.Value.Q, pk.A)
	for t := range g.secrets {
		sum := g.proto.AllocateShare()
		for i, s := range shares {
			if len(s) != g.secrets {
				return nil, fmt.Errorf("%w: party %d sent %d shares for %d %ss", errs.ErrInvalid, i, len(s), g.secrets, g.what)
			}
			g.proto.AggregateShares(sum, s[t], &sum)
		}
		b := rq.NewPoly()
		rq.IMForm(sum.Value.Q, b)
		pk.B = append(pk.B, b)
	}
	return pk, nil
}

// Parameters are the ring and modulus the key lives in (the shape of the
// shares).
func (g *PublicKeyGen) Parameters() rlwe.Parameters { return g.par }

// AllocateShares allocates one party's shares, one per secret (to be read
// from a message).
func (g *PublicKeyGen) AllocateShares() []multiparty.PublicKeyGenShare {
	out := make([]multiparty.PublicKeyGenShare, g.secrets)
	for t := range out {
		out[t] = g.proto.AllocateShare()
	}
	return out
}
