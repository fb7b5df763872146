package engine

import (
	"fmt"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring/ringqp"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// giantSum accumulates sum_j Rot_{r_j}(Relin(acc_j)) over the giant steps
// of one worker, where each acc_j is a giant step's degree-2 accumulator,
// with one division by the special modulus P (ModDown) of one polynomial
// per giant step and one of the sum per group, instead of two divisions of
// two polynomials per giant step. It composes Lattigo's lazy key switching the way
// Lattigo's own linear transformations accumulate their giant steps:
//
//   - the relinearisation's gadget product R = P d2 s^2 stays modulo QP
//     (GadgetProductLazy); only its second part is brought down to Q, since
//     the rotation's key switch must decompose d1 + R1/P;
//   - the rotation (AutomorphismHoistedLazy) returns sigma(P d0 + KS(x1))
//     modulo QP, to which sigma(R0) is added, so the relinearised and rotated
//     giant step is P times the usual result, modulo QP;
//   - the sum is divided by P once (finish).
//
// The result decrypts to the same value as relinearising, rotating and
// adding each giant step (TestGiantSumMatchesRelinRotate), with fewer
// roundings: one per giant step (R1's division) and one per worker's sum,
// instead of two per key switch.
type giantSum struct {
	p      ckks.Parameters
	eval   *ckks.Evaluator
	rlk    *rlwe.RelinearizationKey
	level  int
	levelP int
	sum    *rlwe.Element[ringqp.Poly] // P times the running sum, mod QP
	relin  *rlwe.Element[ringqp.Poly] // the current giant step's R, mod QP
	rot    *rlwe.Element[ringqp.Poly] // its rotation, mod QP
	x      *rlwe.Ciphertext           // (d0, d1 + R1/P), mod Q
	decomp []ringqp.Poly
	empty  bool
}

// newGiantSum prepares an accumulator at the query's level.
func newGiantSum(p ckks.Parameters, eval *ckks.Evaluator, level int) (*giantSum, error) {
	rlk, err := eval.CheckAndGetRelinearizationKey()
	if err != nil {
		return nil, err
	}
	levelP := rlk.LevelP()
	g := &giantSum{
		p: p, eval: eval, rlk: rlk, level: level, levelP: levelP,
		sum:   rlwe.NewElementExtended(p, 1, level, levelP),
		relin: rlwe.NewElementExtended(p, 1, level, levelP),
		rot:   rlwe.NewElementExtended(p, 1, level, levelP),
		x:     ckks.NewCiphertext(p, 1, level),
		empty: true,
	}
	g.decomp = make([]ringqp.Poly, p.BaseRNSDecompositionVectorSize(level, levelP))
	for i := range g.decomp {
		g.decomp[i] = ringqp.NewPoly(p.N(), level, levelP)
	}
	return g, nil
}

// add adds Rot_rotation(Relin(acc)) to the sum (rotation 0: no rotation).
// acc is a degree-2 ciphertext in the NTT domain at the sum's level.
func (g *giantSum) add(acc *rlwe.Ciphertext, rotation int) error {
	if acc.Degree() != 2 || acc.Level() != g.level || !acc.IsNTT {
		return fmt.Errorf("internal error: giant step of degree %d, level %d (want 2, %d, NTT)", acc.Degree(), acc.Level(), g.level)
	}
	rqp := g.p.RingQP().AtLevel(g.level, g.levelP)
	rq := rqp.RingQ
	if err := g.eval.GadgetProductLazy(g.level, acc.Value[2], &g.rlk.GadgetCiphertext, g.relin); err != nil {
		return err
	}
	if rotation == 0 {
		// P (d0, d1) + R: P is 0 modulo the special primes.
		bigP := rqp.RingP.ModulusAtLevel[g.levelP]
		for k := range 2 {
			rq.MulScalarBigintThenAdd(acc.Value[k], bigP, g.relin.Value[k].Q)
		}
		g.accumulate(g.relin)
		return nil
	}
	galEl := g.p.GaloisElement(rotation)
	g.eval.BasisExtender.ModDownQPtoQNTT(g.level, g.levelP, g.relin.Value[1].Q, g.relin.Value[1].P, g.x.Value[1])
	rq.Add(g.x.Value[1], acc.Value[1], g.x.Value[1])
	g.x.Value[0].CopyLvl(g.level, acc.Value[0])
	*g.x.MetaData = *acc.MetaData
	g.eval.DecomposeNTT(g.level, g.levelP, g.levelP+1, g.x.Value[1], true, g.decomp)
	g.rot.MetaData = g.x.MetaData
	if err := g.eval.AutomorphismHoistedLazy(g.level, g.x, g.decomp, galEl, g.rot); err != nil {
		return fmt.Errorf("giant step rotation by %d: %w", rotation, err)
	}
	// The relinearisation's first part, rotated: sigma(R0).
	rqp.AutomorphismNTTWithIndexThenAddLazy(g.relin.Value[0], g.eval.AutomorphismIndex(galEl), g.rot.Value[0])
	g.accumulate(g.rot)
	return nil
}

// accumulate adds a P-scaled pair (whose residues may be lazy, not yet
// reduced) to the sum.
func (g *giantSum) accumulate(e *rlwe.Element[ringqp.Poly]) {
	rqp := g.p.RingQP().AtLevel(g.level, g.levelP)
	for k := range 2 {
		if g.empty {
			rqp.Reduce(e.Value[k], g.sum.Value[k])
		} else {
			rqp.Reduce(e.Value[k], e.Value[k])
			rqp.Add(g.sum.Value[k], e.Value[k], g.sum.Value[k])
		}
	}
	g.empty = false
}

// merge adds another worker's sum into this one.
func (g *giantSum) merge(o *giantSum) {
	if o.empty {
		return
	}
	g.accumulate(o.sum)
}

// finish divides the sum by P into a new degree-1 ciphertext with the
// giant steps' metadata (scale and NTT flag of meta).
func (g *giantSum) finish(meta *rlwe.MetaData) *rlwe.Ciphertext {
	out := ckks.NewCiphertext(g.p, 1, g.level)
	*out.MetaData = *meta
	g.sum.MetaData = out.MetaData
	g.eval.ModDown(g.level, g.levelP, g.sum, out)
	return out
}
