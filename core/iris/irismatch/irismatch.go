// Package irismatch composes papers/004's first algorithm for encrypted
// iris matching on CPU (docs/IRIS.md): the inner products of an encrypted
// matrix product (package ccmm) become margins by the subtraction of the
// public offsets delta * |m_1 and m_2|, are moved to CKKS slots by a
// half-bootstrap (package scoreslots), classified against 0 by the
// comparator (package comparator), and reduced to one encrypted bit per
// query eye by a product tree (OR = 1 - prod(1 - v)) across ciphertexts and
// slots, bootstrapping whenever the levels run out.
package irismatch

import (
	"fmt"
	"math"

	"encmatch/core/base/comparator"
	"encmatch/core/base/errs"
	"encmatch/core/iris/ccmm"

	"github.com/tuneinsight/lattigo/v6/circuits/ckks/polynomial"
	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// Margins turns the inner products of a CCMM result (modulo Q, scale
// Delta; entry (row, col) = <c'_row, c'_col>) into margins
// <c'_1, c'_2> - delta * |m_1 and m_2| by subtracting the public offsets in
// the coefficients (papers/004 Eq. 2 without the division: the pair
// matches iff its margin is positive). A pair whose masks share no bit
// (overlap 0, padding rows included) never matches: its offset is
// span / 2, a margin far below 0. overlap gives |m_row and m_col|.
func Margins(res *ccmm.SharedA, delta float64, span float64, overlap func(row, col int) int) error {
	if math.IsNaN(delta) || delta <= -1 || delta >= 1 {
		return fmt.Errorf("%w: threshold %v on normalised scores must lie in (-1, 1)", errs.ErrInvalid, delta)
	}
	return res.SubScaled(func(row, col int) float64 {
		if m := overlap(row, col); m > 0 {
			return delta * float64(m)
		}
		return span / 2
	})
}

// Span is the largest |margin| a pair of codes of length inner can have
// at threshold delta: |<c'_1, c'_2> - delta M| <= (1 + |delta|) inner. The
// slots hold margin / Span, in [-1, 1].
func Span(inner int, delta float64) float64 { return (1 + math.Abs(delta)) * float64(inner) }

// Classifier turns slots holding margin / span into match values
// (sign(margin) + 1) / 2 with the comparator at threshold 0.
type Classifier struct {
	Comparator *comparator.Comparator
	params     ckks.Parameters
	poly       *polynomial.Evaluator
}

// NewClassifier makes a classifier for depth kappa in the ring of params
// with the evaluation keys evk (relinearisation).
func NewClassifier(params ckks.Parameters, evk rlwe.EvaluationKeySet, kappa int) (*Classifier, error) {
	cmp, err := comparator.New(kappa, 0, 1)
	if err != nil {
		return nil, err
	}
	eval := ckks.NewEvaluator(params, evk)
	return &Classifier{Comparator: cmp, params: params, poly: polynomial.NewEvaluator(params, eval)}, nil
}

// MarginBand is the comparator's value band on the normalised margin
// (<c'_1, c'_2> - delta M) / inner, the model's margin in
// python/encmatch/iris, at threshold delta: a pair whose margin lies
// farther than this from 0 is classified within comparator.ValueTolerance
// of its exact bit.
func (c *Classifier) MarginBand(delta float64) float64 { return MarginBand(c.Comparator, delta) }

// MarginBand is Classifier.MarginBand for a comparator at threshold 0.
func MarginBand(cmp *comparator.Comparator, delta float64) float64 {
	return cmp.ValueBand * (1 + math.Abs(delta))
}

// Classify evaluates the comparator on ct (slots holding margin / span):
// Comparator.Kappa levels.
func (c *Classifier) Classify(ct *rlwe.Ciphertext) (*rlwe.Ciphertext, error) {
	return c.Comparator.Evaluate(c.poly, ct, c.params.DefaultScale())
}
