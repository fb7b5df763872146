// Package collective makes the keys of an iris search with no party
// holding their secrets (issue 34; docs/IRIS.md, "Threshold iris"): the
// CCMM's query public key (QueryKeyGen), each database block's key into
// the bootstrapping ring (BlockKeyGen), the bootstrapping ring's
// relinearisation and Galois keys (RelinKeyGen, GaloisKeyGen) and its
// sparse-secret encapsulation keys (EncapsulationKeyGen), each from shares
// that n parties compute with Lattigo's multiparty protocols, every key on
// its own common random polynomials from the setup's seed. The exchange of
// the shares between processes is not here yet.
//
// Each party keeps secrets it never sends: its additive shares of the
// query secrets (NewQueryShares) and of the database blocks' secrets
// (NewDBShares), its additive share of the bootstrapping
// ring's secret (uniform ternary; the collective secret is their sum) and
// its share of the encapsulation's ephemeral secret, a ternary secret of
// Hamming weight scoreslots.EphemeralWeight drawn by Lattigo's key
// generator. The ephemeral secret is the sum of the n sparse shares: any
// n - 1 parties together still miss one whole weight-32 share, the secret
// the source's security figure is for, and its l1 norm, at most n times
// 32, is what the bootstrap's modular reduction must cover
// (scoreslots.IrisThreshold, EncapsulationFailure). The two encapsulation
// keys, dense to sparse at q0 p0 and sparse to dense at the whole
// bootstrapping modulus, come out of Lattigo's EvaluationKeyGenProtocol:
// each party sends one share per key, and the sum of the shares is a key
// of the sums, with n times the error variance of one holder's.
package collective

import (
	"fmt"

	"encmatch/core/base/errs"
	"encmatch/core/iris/scoreslots"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/multiparty"
	"github.com/tuneinsight/lattigo/v6/utils"
)

// Party is one party's secrets for the bootstrapping ring. Neither ever
// leaves the party.
type Party struct {
	// Dense is the party's additive share of the bootstrapping ring's
	// secret (uniform ternary).
	Dense *rlwe.SecretKey
	// Sparse is the party's share of the ephemeral secret: ternary, of
	// Hamming weight scoreslots.EphemeralWeight, at the whole
	// bootstrapping modulus.
	Sparse *rlwe.SecretKey
}

// NewParty draws a party's two secrets with Lattigo's key generator for
// parameters whose ephemeral secret is made by several parties
// (scoreslots.Literal.EphemeralShares).
func NewParty(p *scoreslots.Params) (*Party, error) {
	if err := checkShared(p); err != nil {
		return nil, err
	}
	kg := rlwe.NewKeyGenerator(p.Bootstrap.BootstrappingParameters)
	return &Party{Dense: kg.GenSecretKeyNew(), Sparse: kg.GenSecretKeyWithHammingWeightNew(scoreslots.EphemeralWeight)}, nil
}

// checkShared refuses parameters whose ephemeral secret one holder draws.
func checkShared(p *scoreslots.Params) error {
	if p.Lit.EphemeralShares < 2 || p.Bootstrap.EphemeralSecretWeight == 0 {
		return fmt.Errorf("%w: these bootstrapping parameters take one key holder's ephemeral secret (EphemeralShares %d): nothing to make collectively",
			errs.ErrInvalid, p.Lit.EphemeralShares)
	}
	return nil
}

// Shares is what one party sends for the two encapsulation keys.
type Shares struct {
	DenseToSparse, SparseToDense multiparty.EvaluationKeyGenShare
}

// EncapsulationKeyGen runs Lattigo's evaluation-key protocol for the two
// encapsulation keys, on common random polynomials every party derives
// from the same seed.
type EncapsulationKeyGen struct {
	p                *scoreslots.Params
	proto            multiparty.EvaluationKeyGenProtocol
	sparseLevel      rlwe.EvaluationKeyParameters // q0 p0: the layout of Lattigo's dense-to-sparse key
	crpDense, crpTop multiparty.EvaluationKeyGenCRP
}

// NewEncapsulationKeyGen prepares the protocol for parameters p and the
// setup's common reference seed (the same bytes at every party).
func NewEncapsulationKeyGen(p *scoreslots.Params, seed []byte) (*EncapsulationKeyGen, error) {
	if err := checkShared(p); err != nil {
		return nil, err
	}
	e := &EncapsulationKeyGen{p: p, proto: multiparty.NewEvaluationKeyGenProtocol(p.Bootstrap.BootstrappingParameters),
		sparseLevel: rlwe.EvaluationKeyParameters{LevelQ: utils.Pointy(0), LevelP: utils.Pointy(0)}}
	var err error
	if e.crpDense, err = keyCRP(e.proto, seed, "dense-to-sparse", e.sparseLevel); err != nil {
		return nil, err
	}
	if e.crpTop, err = keyCRP(e.proto, seed, "sparse-to-dense"); err != nil {
		return nil, err
	}
	return e, nil
}

// Share computes party's shares of both keys.
func (e *EncapsulationKeyGen) Share(party *Party) (*Shares, error) {
	s := e.AllocateShares()
	if err := e.proto.GenShare(party.Dense, party.Sparse, e.crpDense, &s.DenseToSparse); err != nil {
		return nil, fmt.Errorf("dense-to-sparse share: %w", err)
	}
	if err := e.proto.GenShare(party.Sparse, party.Dense, e.crpTop, &s.SparseToDense); err != nil {
		return nil, fmt.Errorf("sparse-to-dense share: %w", err)
	}
	return s, nil
}

// AllocateShares allocates one party's shares of both keys (to be read
// from a message).
func (e *EncapsulationKeyGen) AllocateShares() *Shares {
	return &Shares{DenseToSparse: e.proto.AllocateShare(e.sparseLevel), SparseToDense: e.proto.AllocateShare()}
}

// Combine adds the shares of every party (exactly EphemeralShares of
// them: a missing party's sparse share would leave the ephemeral secret's
// weight short of what the parameters were checked for) into the two
// keys.
func (e *EncapsulationKeyGen) Combine(shares []*Shares) (*scoreslots.Encapsulation, error) {
	dense, top := make([]multiparty.EvaluationKeyGenShare, len(shares)), make([]multiparty.EvaluationKeyGenShare, len(shares))
	for i, s := range shares {
		if s == nil {
			return nil, fmt.Errorf("%w: party %d sent no shares", errs.ErrInvalid, i)
		}
		dense[i], top[i] = s.DenseToSparse, s.SparseToDense
	}
	d2s, err := combineKey(e.p, e.proto, e.crpDense, dense, e.sparseLevel)
	if err != nil {
		return nil, err
	}
	s2d, err := combineKey(e.p, e.proto, e.crpTop, top)
	if err != nil {
		return nil, err
	}
	return &scoreslots.Encapsulation{DenseToSparse: d2s, SparseToDense: s2d}, nil
}
