package irismatch

import (
	"fmt"
	"math"
	"time"

	"encmatch/core/base/errs"
	"encmatch/core/base/parallel"
	"encmatch/core/iris/ccmm"
	"encmatch/core/iris/discretise"
	"encmatch/core/iris/scoreslots"

	"github.com/tuneinsight/lattigo/v6/circuits/ckks/bootstrapping"
	"github.com/tuneinsight/lattigo/v6/core/rlwe"
)

// Pipeline is the server's part of the iris matching after the encrypted
// matrix product: margins, half-bootstraps, classification and the
// reduction to one bit per query eye. The query's columns are Eyes x
// Rotations, column e*Rotations + r holding eye e at its r-th rotation.
type Pipeline struct {
	Slots      *scoreslots.Params
	Classifier *Classifier
	Delta      float64 // the match threshold on normalised scores, 1 - 2t
	Rotations  int     // rotations per eye (31 for open-iris's shift 15)
	// Discretiser turns every eye's value into 0 or 1 (nil for
	// bootstrappings without sparse-secret encapsulation: an eye in the
	// comparator's band then reads a value between 0 and 1).
	Discretiser *discretise.Discretiser
	evals       []*bootstrapping.Evaluator
}

// NewPipeline makes the pipeline for threshold delta, comparator depth
// kappa and rotations per eye, with the bootstrapping keys of every
// database block (keys must hold ReducerGaloisElements).
func NewPipeline(p *scoreslots.Params, keys *scoreslots.Keys, kappa int, delta float64, rotations int) (*Pipeline, error) {
	if rotations < 1 {
		return nil, fmt.Errorf("%w: %d rotations per eye", errs.ErrInvalid, rotations)
	}
	if s := Span(p.CCMM.Lit.Inner, delta); s > math.Ldexp(1, p.Lit.ScoreBits) { // LiftColumn's bound
		return nil, fmt.Errorf("%w: margins up to %.0f need a score bound of 2^%d or more, the parameters have 2^%d",
			errs.ErrInvalid, s, int(math.Ceil(math.Log2(s))), p.Lit.ScoreBits)
	}
	dec := discretise.StartDecoding(p.Bootstrap) // made beside the evaluators (the set-up's two slow parts)
	evals, err := p.NewEvaluators(keys)
	if err != nil {
		return nil, err
	}
	cl, err := NewClassifier(p.Bootstrap.BootstrappingParameters, keys.Shared, kappa)
	if err != nil {
		return nil, err
	}
	pl := &Pipeline{Slots: p, Classifier: cl, Delta: delta, Rotations: rotations, evals: evals}
	if pl.Discretiser, err = discretise.NewIfSupported(evals[0], dec); err != nil {
		return nil, err
	}
	return pl, nil
}

// Stats reports what a Match did: the wall time spent in each stage (each
// runs on all workers) and the counts.
type Stats struct {
	Wall                                time.Duration
	Lift, HalfBootstrap, Classify       time.Duration
	Margins, Reduce, Gather, Discretise time.Duration
	// Discretised: the result went through the Discretiser.
	Discretised                            bool
	HalfBootstraps, Classified, Bootstraps int
	// MarginBand is the comparator's band on the normalised margin: eyes
	// whose best margin lies within it may read anything in [0, 1].
	MarginBand float64
}

// Batch is the number of half-bootstraps (in Match) or bootstraps (in the
// reduction) run together: their DFTs go a factor at a time across the
// batch (package dftbatch), so that a key cache holding one factor's
// Galois keys (up to 15 of 0.43 GB at the default preset) reads each key
// about once per batch rather than once per bootstrap. Each holds about
// 35 MB after ModUp and 60 MB after CoeffsToSlots at the default preset,
// about 1.5 GB for the batch.
const Batch = 12

// ResultSlot is the slot of Match's output that holds eye e, for the
// parameters p.
func ResultSlot(p *scoreslots.Params, e int) int {
	return EyeSlot(e, packing(p), chunkWidth(p), p.Bootstrap.BootstrappingParameters.MaxSlots())
}

// Match runs the pipeline on a rescaled CCMM result (rows: database codes
// in blocks of N_db, one database secret each; columns: Eyes x Rotations;
// modified in place into margins) with the public overlaps
// |m_row and m_col|. It returns one ciphertext of the bootstrapping ring
// whose slot ResultSlot(e) holds eye e's bit (1: some code matches some
// rotation; discretised, when the pipeline has a Discretiser, so that an
// eye inside the comparator's band reads 0 or 1 too) and every other slot
// 0.
func (pl *Pipeline) Match(res *ccmm.SharedA, overlap func(row, col int) int) (*rlwe.Ciphertext, *Stats, error) {
	n := pl.Slots.Residual.N()
	if res.Cols%pl.Rotations != 0 || res.Rows%n != 0 || res.Rows/n != len(pl.evals) {
		return nil, nil, fmt.Errorf("%w: a %dx%d result for %d rotations per eye and %d database blocks of %d codes",
			errs.ErrInvalid, res.Rows, res.Cols, pl.Rotations, len(pl.evals), n)
	}
	eyes, blocks := res.Cols/pl.Rotations, res.Rows/n
	st := &Stats{MarginBand: pl.Classifier.MarginBand(pl.Delta)}
	begin := time.Now()
	span := Span(pl.Slots.CCMM.Lit.Inner, pl.Delta)
	if err := Margins(res, pl.Delta, span, overlap); err != nil {
		return nil, nil, err
	}
	st.Margins = time.Since(begin)
	// A half-bootstrap packs `pack` result ciphertexts; its outputs hold
	// input u in the u-th chunk of width slots. Each half-bootstrap takes one
	// rotation of `pack` different eyes (a group; the last group repeats its
	// last eye), so that chunk u of every output of a group holds eye u's
	// values and the group reduces to its bits in one ciphertext.
	pack, width := packing(pl.Slots), chunkWidth(pl.Slots)
	groups := (eyes + pack - 1) / pack
	// Every (group, block, rotation) is one job: a half-bootstrap and its
	// classifications. Jobs run Batch at a time, each stage
	// across the batch; values[g] collects group g's match values in a
	// fixed order.
	perGroup := blocks * pl.Rotations
	classified := make([][]*rlwe.Ciphertext, groups*perGroup)
	for lo := 0; lo < len(classified); lo += Batch {
		jobs := classified[lo:min(lo+Batch, len(classified))]
		start := time.Now()
		sets, evals := make([][]*rlwe.Ciphertext, len(jobs)), make([]*bootstrapping.Evaluator, len(jobs))
		err := parallel.For(len(jobs), func(k int) error {
			job := lo + k
			g, t, r := job/perGroup, job%perGroup/pl.Rotations, job%pl.Rotations
			evals[k] = pl.evals[t]
			for u := range pack {
				e := min(g*pack+u, eyes-1)
				ct, err := pl.Slots.LiftColumn(res, t, e*pl.Rotations+r, span) // the message is margin / span
				if err != nil {
					return err
				}
				sets[k] = append(sets[k], ct)
			}
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
		st.Lift += time.Since(start)
		start = time.Now()
		slots, err := pl.Slots.ToSlots(evals, sets)
		if err != nil {
			return nil, nil, fmt.Errorf("half-bootstrap: %w", err)
		}
		st.HalfBootstrap += time.Since(start)
		st.HalfBootstraps += len(jobs)
		start = time.Now()
		var flat []*rlwe.Ciphertext
		for _, cts := range slots {
			flat = append(flat, cts...)
		}
		err = parallel.For(len(flat), func(i int) (err error) {
			flat[i], err = pl.Classifier.Classify(flat[i])
			if err != nil {
				return fmt.Errorf("classification: %w", err)
			}
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
		st.Classify += time.Since(start)
		st.Classified += len(flat)
		for k := range jobs {
			jobs[k], flat = flat[:len(slots[k])], flat[len(slots[k]):]
		}
	}
	values := make([][]*rlwe.Ciphertext, groups)
	for job, vs := range classified {
		values[job/perGroup] = append(values[job/perGroup], vs...)
	}
	start := time.Now()
	red, err := NewReducer(pl.evals[0])
	if err != nil {
		return nil, nil, err
	}
	bits, err := red.AnyMatch(values, width)
	if err != nil {
		return nil, nil, err
	}
	st.Reduce = time.Since(start)
	start = time.Now()
	out, err := red.Gather(bits, eyes, pack, width)
	if err != nil {
		return nil, nil, err
	}
	st.Gather = time.Since(start)
	if pl.Discretiser != nil {
		start = time.Now()
		if out, err = pl.Discretiser.Apply(out); err != nil {
			return nil, nil, err
		}
		st.Discretise, st.Discretised = time.Since(start), true
	}
	st.Bootstraps = red.Bootstraps()
	st.Wall = time.Since(begin)
	return out, st, nil
}
