// Package irismatch composes papers/004's first algorithm for encrypted
// iris matching on CPU (docs/IRIS.md): the scores of an encrypted matrix
// product (package ccmm), moved to CKKS slots by a half-bootstrap (package
// scoreslots), are normalised by the public mask overlaps and classified
// against the threshold by the comparator (package comparator), giving one
// match value in [0, 1] per (database code, query rotation).
package irismatch

import (
	"fmt"
	"math"

	"encmatch/core/comparator"
	"encmatch/core/errs"
	"encmatch/core/scoreslots"

	"github.com/tuneinsight/lattigo/v6/circuits/ckks/polynomial"
	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// Classifier normalises and classifies half-bootstrapped scores.
type Classifier struct {
	Slots      *scoreslots.Params
	Comparator *comparator.Comparator
	params     ckks.Parameters
	eval       *ckks.Evaluator
	poly       *polynomial.Evaluator
	encoder    *ckks.Encoder
}

// NewClassifier makes a classifier at the bootstrapping ring of p with the
// relinearisation key in evk (the bootstrapping keys' set).
func NewClassifier(p *scoreslots.Params, evk rlwe.EvaluationKeySet, cmp *comparator.Comparator) *Classifier {
	params := p.Bootstrap.BootstrappingParameters
	eval := ckks.NewEvaluator(params, evk)
	return &Classifier{Slots: p, Comparator: cmp, params: params, eval: eval,
		poly: polynomial.NewEvaluator(params, eval), encoder: ckks.NewEncoder(params)}
}

// Classify turns output ciphertext s of scoreslots.ToSlots (slots holding
// score / 2^ScoreBits) into match values: slot i, the score of database row
// r against input column j (p.SlotOf(s, i)), is multiplied by the public
// 2^ScoreBits * ScoreScale / overlap(j, r), the normalised score the
// comparator reads, then the comparator gives (sign(score - delta) + 1) / 2.
// A pair with no overlapping bits (overlap 0) is multiplied by 0: a
// normalised score of 0, a non-match for every delta > 0. It consumes one
// level for the normalisation and Comparator.Kappa for the comparator.
func (c *Classifier) Classify(s int, ct *rlwe.Ciphertext, overlap func(column, row int) int) (*rlwe.Ciphertext, error) {
	need := 1 + c.Comparator.Kappa
	if ct.Level() < need {
		return nil, fmt.Errorf("%w: the slots are at level %d, normalising and classifying need %d", errs.ErrInvalid, ct.Level(), need)
	}
	factors := make([]float64, ct.Slots())
	unit := math.Ldexp(c.Comparator.ScoreScale, c.Slots.Lit.ScoreBits)
	for i := range factors {
		col, row := c.Slots.SlotOf(s, i)
		if o := overlap(col, row); o > 0 {
			factors[i] = unit / float64(o)
		}
	}
	// The plaintext's scale brings the product, once rescaled by the top
	// prime q_l, to the default scale the comparator's evaluator works at:
	// ct.Scale * pt.Scale = DefaultScale * q_l.
	pt := ckks.NewPlaintext(c.params, ct.Level())
	pt.Scale = c.params.DefaultScale().Mul(rlwe.NewScale(c.params.Q()[ct.Level()])).Div(ct.Scale)
	if err := c.encoder.Encode(factors, pt); err != nil {
		return nil, err
	}
	norm, err := c.eval.MulNew(ct, pt)
	if err != nil {
		return nil, err
	}
	if err := c.eval.Rescale(norm, norm); err != nil {
		return nil, err
	}
	return c.Comparator.Evaluate(c.poly, norm, c.params.DefaultScale())
}
