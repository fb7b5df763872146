package collective

import (
	"fmt"

	"encmatch/core/base/errs"
	"encmatch/core/iris/ccmm"
	"encmatch/core/iris/scoreslots"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/multiparty"
	"github.com/tuneinsight/lattigo/v6/ring"
)

// NewDBShares draws a party's additive shares of the database secrets of
// blocks database blocks (ring N_db, Lattigo's key generator, as
// ccmm.GenKeys draws one holder's).
func NewDBShares(cp *ccmm.Params, blocks int) ccmm.Keys {
	return ccmm.GenKeys(cp.DB, blocks)
}

// BlockKeyGen runs Lattigo's EvaluationKeyGenProtocol for one database
// block's key into the bootstrapping ring (the key scoreslots.AddBlock
// makes for one holder): from the block's database secret, the sum of
// the parties' shares, to the bootstrapping ring's secret, the sum of
// their dense shares.
type BlockKeyGen struct {
	p     *scoreslots.Params
	proto multiparty.EvaluationKeyGenProtocol
	crp   multiparty.EvaluationKeyGenCRP
}

// NewBlockKeyGen prepares the protocol for block `block` of a database
// under parameters p, on the setup's common reference seed (every block
// gets its own common random polynomials).
func NewBlockKeyGen(p *scoreslots.Params, seed []byte, block int) (*BlockKeyGen, error) {
	if err := checkShared(p); err != nil {
		return nil, err
	}
	if block < 0 {
		return nil, fmt.Errorf("%w: block %d", errs.ErrInvalid, block)
	}
	g := &BlockKeyGen{p: p, proto: multiparty.NewEvaluationKeyGenProtocol(p.Bootstrap.BootstrappingParameters)}
	var err error
	if g.crp, err = keyCRP(g.proto, seed, fmt.Sprintf("block-%d", block)); err != nil {
		return nil, err
	}
	return g, nil
}

// Share computes a party's share of the block key from its share of the
// block's database secret and its dense share of the bootstrapping
// secret. The database share is embedded in the bootstrapping ring as
// Lattigo's key generator embeds one holder's secret (Y = X^(N2 / N_db),
// then the small-norm basis extension from q0 to every prime), which is
// linear: the shares' embeddings add up to the sum's.
func (g *BlockKeyGen) Share(dbShare, dense *rlwe.SecretKey) (multiparty.EvaluationKeyGenShare, error) {
	res, err := g.p.CCMM.SecretAs(dbShare, g.p.Residual)
	if err != nil {
		return multiparty.EvaluationKeyGenShare{}, err
	}
	bp := g.p.Bootstrap.BootstrappingParameters
	rq, rp := bp.RingQ(), bp.RingP()
	mapped, buff := rq.NewPoly(), rq.AtLevel(0).NewPoly()
	ring.MapSmallDimensionToLargerDimensionNTT(res.Value.Q, mapped)
	in := rlwe.NewSecretKey(bp)
	rlwe.ExtendBasisSmallNormAndCenterNTTMontgomery(rq, rq, mapped, buff, in.Value.Q)
	rlwe.ExtendBasisSmallNormAndCenterNTTMontgomery(rq, rp, mapped, buff, in.Value.P)
	share := g.proto.AllocateShare()
	if err := g.proto.GenShare(in, dense, g.crp, &share); err != nil {
		return multiparty.EvaluationKeyGenShare{}, err
	}
	return share, nil
}

// Combine adds every party's share (exactly EphemeralShares, the setup's
// parties) into the block key.
func (g *BlockKeyGen) Combine(shares []multiparty.EvaluationKeyGenShare) (*rlwe.EvaluationKey, error) {
	return combineKey(g.p, g.proto, g.crp, shares)
}

// AllocateShare allocates one party's share (to be read from a message).
func (g *BlockKeyGen) AllocateShare() multiparty.EvaluationKeyGenShare {
	return g.proto.AllocateShare()
}
