package collective

import (
	"crypto/sha256"
	"fmt"

	"encmatch/core/base/errs"
	"encmatch/core/iris/scoreslots"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/multiparty"
	"github.com/tuneinsight/lattigo/v6/utils/sampling"
)

// crsFor is the common reference string of one protocol run: a keyed PRNG
// on SHA-256 of the setup's seed and the run's label, so that every run
// (every key) gets its own common random polynomials.
func crsFor(seed []byte, label string) (multiparty.CRS, error) {
	if len(seed) < 16 {
		return nil, fmt.Errorf("%w: a common reference seed of %d bytes (at least 16)", errs.ErrInvalid, len(seed))
	}
	key := sha256.Sum256(append(append([]byte(nil), seed...), "encmatch/iris/collective/"+label...))
	return sampling.NewKeyedPRNG(key[:])
}

// checkParties refuses the shares of another number of parties than the
// setup has (EphemeralShares).
func checkParties(p *scoreslots.Params, got int) error {
	if n := p.Lit.EphemeralShares; got != n {
		return fmt.Errorf("%w: %d parties' shares, the setup has %d", errs.ErrInvalid, got, n)
	}
	return nil
}

// keyCRP is the common random polynomials of one evaluation key of layout
// lvl (none: the whole modulus), on the run labelled label.
func keyCRP(proto multiparty.EvaluationKeyGenProtocol, seed []byte, label string, lvl ...rlwe.EvaluationKeyParameters) (multiparty.EvaluationKeyGenCRP, error) {
	crs, err := crsFor(seed, label)
	if err != nil {
		return multiparty.EvaluationKeyGenCRP{}, err
	}
	return proto.SampleCRP(crs, lvl...), nil
}

// combineKey adds every party's share of one evaluation key of layout lvl
// (exactly the setup's parties) and makes the key.
func combineKey(p *scoreslots.Params, proto multiparty.EvaluationKeyGenProtocol, crp multiparty.EvaluationKeyGenCRP,
	shares []multiparty.EvaluationKeyGenShare, lvl ...rlwe.EvaluationKeyParameters) (*rlwe.EvaluationKey, error) {
	if err := checkParties(p, len(shares)); err != nil {
		return nil, err
	}
	sum := proto.AllocateShare(lvl...)
	for i, s := range shares {
		if err := proto.AggregateShares(sum, s, &sum); err != nil {
			return nil, fmt.Errorf("%w: party %d's share: %v", errs.ErrInvalid, i, err)
		}
	}
	key := rlwe.NewEvaluationKey(p.Bootstrap.BootstrappingParameters, lvl...)
	if err := proto.GenEvaluationKey(sum, crp, key); err != nil {
		return nil, err
	}
	return key, nil
}

// RelinKeyGen runs Lattigo's two-round relinearisation-key protocol (RKG)
// on the bootstrapping ring, from the parties' dense shares.
type RelinKeyGen struct {
	p     *scoreslots.Params
	proto multiparty.RelinearizationKeyGenProtocol
	crp   multiparty.RelinearizationKeyGenCRP
}

// NewRelinKeyGen prepares the protocol for parameters p and the setup's
// seed.
func NewRelinKeyGen(p *scoreslots.Params, seed []byte) (*RelinKeyGen, error) {
	if err := checkShared(p); err != nil {
		return nil, err
	}
	crs, err := crsFor(seed, "relinearisation")
	if err != nil {
		return nil, err
	}
	g := &RelinKeyGen{p: p, proto: multiparty.NewRelinearizationKeyGenProtocol(p.Bootstrap.BootstrappingParameters)}
	g.crp = g.proto.SampleCRP(crs)
	return g, nil
}

// Round1 is a party's first round: its ephemeral secret (kept until
// Round2) and its public share.
func (g *RelinKeyGen) Round1(party *Party) (*rlwe.SecretKey, multiparty.RelinearizationKeyGenShare) {
	eph, share, _ := g.proto.AllocateShare()
	g.proto.GenShareRoundOne(party.Dense, g.crp, eph, &share)
	return eph, share
}

// Aggregate adds every party's share of one round (exactly the setup's
// parties).
func (g *RelinKeyGen) Aggregate(shares []multiparty.RelinearizationKeyGenShare) (multiparty.RelinearizationKeyGenShare, error) {
	if err := checkParties(g.p, len(shares)); err != nil {
		return multiparty.RelinearizationKeyGenShare{}, err
	}
	_, sum, second := g.proto.AllocateShare()
	if shares[0].Degree() == 0 { // second-round shares have one polynomial per row
		sum = second
	}
	for _, s := range shares {
		if s.Degree() != sum.Degree() {
			return multiparty.RelinearizationKeyGenShare{}, fmt.Errorf("%w: shares of both rounds mixed", errs.ErrInvalid)
		}
		g.proto.AggregateShares(sum, s, &sum)
	}
	return sum, nil
}

// Round2 is a party's second round, on the aggregate of every first-round
// share.
func (g *RelinKeyGen) Round2(party *Party, eph *rlwe.SecretKey, round1 multiparty.RelinearizationKeyGenShare) multiparty.RelinearizationKeyGenShare {
	_, _, share := g.proto.AllocateShare()
	g.proto.GenShareRoundTwo(eph, party.Dense, round1, &share)
	return share
}

// AllocateShares allocates a share of each round (to be read from a
// message): the first round's has two polynomials per row, the second's
// one.
func (g *RelinKeyGen) AllocateShares() (round1, round2 multiparty.RelinearizationKeyGenShare) {
	_, round1, round2 = g.proto.AllocateShare()
	return round1, round2
}

// Key is the relinearisation key of the two rounds' aggregates.
func (g *RelinKeyGen) Key(round1, round2 multiparty.RelinearizationKeyGenShare) *rlwe.RelinearizationKey {
	key := rlwe.NewRelinearizationKey(g.p.Bootstrap.BootstrappingParameters)
	g.proto.GenRelinearizationKey(round1, round2, key)
	return key
}

// GaloisKeyGen runs Lattigo's Galois-key protocol (GKG) on the
// bootstrapping ring, one run per Galois element, from the parties' dense
// shares.
type GaloisKeyGen struct {
	p     *scoreslots.Params
	seed  []byte
	proto multiparty.GaloisKeyGenProtocol
}

// NewGaloisKeyGen prepares the protocol for parameters p and the setup's
// seed.
func NewGaloisKeyGen(p *scoreslots.Params, seed []byte) (*GaloisKeyGen, error) {
	if err := checkShared(p); err != nil {
		return nil, err
	}
	if _, err := crsFor(seed, "galois"); err != nil {
		return nil, err
	}
	return &GaloisKeyGen{p: p, seed: append([]byte(nil), seed...), proto: multiparty.NewGaloisKeyGenProtocol(p.Bootstrap.BootstrappingParameters)}, nil
}

// crp is the common random polynomials of element g's key: its own, as
// one a shared by two Galois keys of one secret would open sigma_1(s) -
// sigma_2(s).
func (k *GaloisKeyGen) crp(g uint64) (multiparty.GaloisKeyGenCRP, error) {
	crs, err := crsFor(k.seed, fmt.Sprintf("galois-%d", g))
	if err != nil {
		return multiparty.GaloisKeyGenCRP{}, err
	}
	return k.proto.SampleCRP(crs), nil
}

// Share is a party's share of the key of Galois element g.
func (k *GaloisKeyGen) Share(party *Party, g uint64) (multiparty.GaloisKeyGenShare, error) {
	crp, err := k.crp(g)
	if err != nil {
		return multiparty.GaloisKeyGenShare{}, err
	}
	share := k.proto.AllocateShare()
	if err := k.proto.GenShare(party.Dense, g, crp, &share); err != nil {
		return multiparty.GaloisKeyGenShare{}, err
	}
	return share, nil
}

// Key adds every party's share of element g's key (exactly the setup's
// parties; each share names its element, and one for another is
// refused).
func (k *GaloisKeyGen) Key(g uint64, shares []multiparty.GaloisKeyGenShare) (*rlwe.GaloisKey, error) {
	if err := checkParties(k.p, len(shares)); err != nil {
		return nil, err
	}
	sum := k.proto.AllocateShare()
	sum.GaloisElement = g
	for i, s := range shares {
		if err := k.proto.AggregateShares(sum, s, &sum); err != nil {
			return nil, fmt.Errorf("%w: party %d's share for element %d: %v", errs.ErrInvalid, i, g, err)
		}
	}
	crp, err := k.crp(g)
	if err != nil {
		return nil, err
	}
	key := rlwe.NewGaloisKey(k.p.Bootstrap.BootstrappingParameters)
	if err := k.proto.GenGaloisKey(sum, crp, key); err != nil {
		return nil, err
	}
	return key, nil
}

// AllocateShare allocates one party's share of the key of Galois element
// g (to be read from a message).
func (k *GaloisKeyGen) AllocateShare(g uint64) multiparty.GaloisKeyGenShare {
	share := k.proto.AllocateShare()
	share.GaloisElement = g
	return share
}
