// Package foldmatch composes papers/004's second algorithm for encrypted
// iris matching (docs/IRIS.md, "Folding (Algorithm 2)"): the k rotations
// of a fold group are folded into one sum per database code before any
// bootstrap (package fold: the sum of a fold polynomial at every pair's
// normalised score), P sums are bootstrapped together (fold.Refresher),
// each sum is classified twice by the comparator, *sure* (S >= SureAt on
// f's sums) and *maybe* (S >= MaybeAt on h's sums, or f's), and the
// classifications are reduced to two bits per query eye by the product
// tree of package irismatch. The receiver reads an eye as a match if it is
// sure, as no match if it is not maybe, and flagged otherwise; flagged
// eyes go through the same pipeline with PairFold (groups of one rotation,
// f(x) = x, one classifier at x >= 0: every pair alone, as papers/004's
// first algorithm classifies them, on the slot-encoded database). The
// design of f, h and the thresholds
// (python's encmatch.iris.folding) makes every clean answer equal to the
// plaintext model outside the guard band, whatever the gallery, as long
// as the comparator's band and the evaluation's error fit the design's
// tolerances, which NewPipeline checks.
package foldmatch

import (
	"fmt"
	"math"
	"slices"
	"time"

	"encmatch/core/base/comparator"
	"encmatch/core/base/errs"
	"encmatch/core/base/parallel"
	"encmatch/core/iris/ccmm"
	"encmatch/core/iris/discretise"
	"encmatch/core/iris/fold"
	"encmatch/core/iris/irismatch"
	"encmatch/core/iris/scoreslots"

	"github.com/tuneinsight/lattigo/v6/circuits/ckks/bootstrapping"
	"github.com/tuneinsight/lattigo/v6/circuits/ckks/polynomial"
	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// Classifier is one of the design's two classifiers of slot sums.
type Classifier struct {
	// At is the threshold on the sums; Range holds every sum a slot can
	// take (the design's sum_range or maybe_range); Tolerance is how far
	// from At a sum may be and still get its exact bit (the design's
	// sure_tolerance, or tolerance for maybe): the comparator's band and
	// the evaluation's error must fit in it.
	At        float64
	Range     [2]float64
	Tolerance float64
}

// Literal is the classification of a fold design.
type Literal struct {
	// Kappa is the comparator's depth; Rotations the rotations per query
	// eye (31 for open-iris's shift 15); GroupSize k the rotations a fold
	// group adds (the design's k; the last group of an eye may be smaller).
	Kappa, Rotations, GroupSize int
	// Sure reads f's sums; Maybe reads h's (the fold's second
	// polynomial), or f's when the fold has one polynomial; without Maybe
	// (the pair pass) only the sure bits are computed.
	Sure  Classifier
	Maybe *Classifier
	// EvalError bounds what the fold, the bootstrap and the unmixing add
	// to a sum (measured: docs/IRIS.md).
	EvalError float64
}

// Pipeline is the server's part of Algorithm 2 after the encrypted matrix
// product of a slot-encoded database.
type Pipeline struct {
	Fold  *fold.Params
	Slots *scoreslots.Params
	Lit   Literal
	// Comparators of Sure and Maybe (nil without it), on the sums mapped
	// onto [-1, 1]: t = (2 S - lo - hi) / (hi - lo), [lo, hi] the
	// classifier's Domain.
	Sure, Maybe *comparator.Comparator
	// Discretiser turns every eye's bits into 0 or 1 (nil for
	// bootstrappings without sparse-secret encapsulation).
	Discretiser *discretise.Discretiser
	folders     []*fold.Evaluator // per database block
	refresher   *fold.Refresher
	evals       []*bootstrapping.Evaluator
}

// GaloisElements are the rotations the bootstrapping keys of a pipeline
// need beyond the bootstrap's own: the unmixing's and the reduction's.
func GaloisElements(s *scoreslots.Params) []uint64 {
	els := append(fold.UnmixGaloisElements(s), irismatch.ReducerGaloisElements(s)...)
	slices.Sort(els)
	return slices.Compact(els)
}

// NewPipeline makes the pipeline of the fold fp and the bootstrapping s
// with the fold keys of every database block (fold.Params.GenKeys) and the
// bootstrapping keys (with GaloisElements). It checks that the
// comparators' bands, with EvalError, fit the classifiers' tolerances,
// that every sum of a group lies in its classifier's range, and that the
// refreshed sums have the comparator's levels.
func NewPipeline(fp *fold.Params, s *scoreslots.Params, foldKeys []rlwe.EvaluationKeySet, keys *scoreslots.Keys, lit Literal) (*Pipeline, error) {
	if lit.Rotations < 1 || lit.GroupSize < 1 || len(foldKeys) == 0 || !(lit.EvalError >= 0) {
		return nil, fmt.Errorf("%w: %d rotations per eye, fold groups of %d, %d blocks' keys, evaluation error %v",
			errs.ErrInvalid, lit.Rotations, lit.GroupSize, len(foldKeys), lit.EvalError)
	}
	dec := discretise.StartDecoding(s.Bootstrap) // made beside the evaluators (the set-up's two slow parts)
	evals, err := s.NewEvaluators(keys)
	if err != nil {
		return nil, err
	}
	if len(evals) != len(foldKeys) {
		return nil, fmt.Errorf("%w: %d blocks' bootstrapping keys, %d blocks' fold keys", errs.ErrMismatch, len(evals), len(foldKeys))
	}
	pl := &Pipeline{Fold: fp, Slots: s, Lit: lit, evals: evals}
	cmps, err := comparators(fp, lit)
	if err != nil {
		return nil, err
	}
	pl.Sure = cmps[0]
	if len(cmps) > 1 {
		pl.Maybe = cmps[1]
	}
	// Each polynomial's sums leave the refresh divided by the width of
	// the range its classifiers read.
	widths := make([]float64, len(fp.Lit.Polynomials()))
	for i, c := range lit.classifiers() {
		lo, hi := lit.Domain(c)
		if w := widths[polyOf(fp, i)]; w != 0 && w != hi-lo {
			return nil, fmt.Errorf("%w: the two classifiers read f's sums on different ranges", errs.ErrInvalid)
		}
		widths[polyOf(fp, i)] = hi - lo
	}
	if pl.refresher, err = fp.NewRefresher(s, evals, lit.GroupSize, widths); err != nil {
		return nil, err
	}
	if level := pl.refresher.OutputLevel(); level < lit.Kappa {
		return nil, fmt.Errorf("%w: the refreshed sums have %d levels, the comparator takes %d", errs.ErrInvalid, level, lit.Kappa)
	}
	for _, k := range foldKeys {
		pl.folders = append(pl.folders, fp.NewEvaluator(k))
	}
	if pl.Discretiser, err = discretise.NewIfSupported(evals[0], dec); err != nil {
		return nil, err
	}
	return pl, nil
}

// DomainMargin is how far beyond a classifier's range, as a fraction of
// the range's width and on each side, its comparator's domain reaches
// (beside EvalError). EvalError bounds a sum's error near the thresholds;
// far from them the error grows with the scores (TestFoldPresetPrecision,
// fold preset: up to 0.64 at a sum of 575.5 in f's range [-0.25, 960],
// and once in about 30 runs 0.075 at -0.24), and a sum outside the domain
// would leave the comparator's [-1, 1], where its polynomials are not
// bounded. The margin widens the comparator's band on the sums by 2 %.
const DomainMargin = 0.01

// Domain is the range classifier c's comparator reads: c's range widened
// on both sides by EvalError and DomainMargin of its width.
func (lit Literal) Domain(c Classifier) (lo, hi float64) {
	m := lit.EvalError + DomainMargin*(c.Range[1]-c.Range[0])
	return c.Range[0] - m, c.Range[1] + m
}

// classifiers are Sure, then Maybe if the literal has it.
func (lit Literal) classifiers() []Classifier {
	if lit.Maybe == nil {
		return []Classifier{lit.Sure}
	}
	return []Classifier{lit.Sure, *lit.Maybe}
}

// Check runs NewPipeline's checks of a classification on a fold without
// keys: every sum in its classifier's range, the comparators' bands with
// EvalError within the tolerances.
func Check(fp *fold.Params, lit Literal) error {
	_, err := comparators(fp, lit)
	return err
}

// Bands are NewPipeline's bands of lit's classifiers on fp's sums (sure,
// then maybe): the comparator's band and EvalError, the distance from a
// threshold within which the model does not settle a bit.
func Bands(fp *fold.Params, lit Literal) ([]float64, error) {
	cmps, err := comparators(fp, lit)
	if err != nil {
		return nil, err
	}
	var out []float64
	for i, c := range lit.classifiers() {
		out = append(out, lit.band(cmps[i], c))
	}
	return out, nil
}

// comparators checks lit's classifiers on fp's sums and returns their
// comparators, in the order of Literal.classifiers (sure, then maybe).
func comparators(fp *fold.Params, lit Literal) ([]*comparator.Comparator, error) {
	var out []*comparator.Comparator
	for i, c := range lit.classifiers() {
		cmp, err := classifierComparator(fp, lit, c, polyOf(fp, i))
		if err != nil {
			return nil, fmt.Errorf("classifier %d: %w", i, err)
		}
		out = append(out, cmp)
	}
	return out, nil
}

// polyOf is the fold polynomial classifier i reads: f for sure, the last
// one (h, or f) for maybe.
func polyOf(fp *fold.Params, i int) int { return min(i, len(fp.Lit.Polynomials())-1) }

// poly is polyOf for the pipeline's fold.
func (pl *Pipeline) poly(i int) int { return polyOf(pl.Fold, i) }

// classifierComparator checks classifier c on the sums of fold polynomial
// poly and returns its comparator: every sum must lie in c's range, and
// the comparator's band, read on the sums mapped from c's domain onto
// [-1, 1], with EvalError must fit c's tolerance.
func classifierComparator(fp *fold.Params, lit Literal, c Classifier, poly int) (*comparator.Comparator, error) {
	if err := checkRange(fp, poly, lit.GroupSize, c.Range); err != nil {
		return nil, err
	}
	lo, hi := lit.Domain(c)
	cmp, err := comparator.New(lit.Kappa, (2*c.At-lo-hi)/(hi-lo), 1)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errs.ErrInvalid, err)
	}
	if band := lit.band(cmp, c); band > c.Tolerance {
		return nil, fmt.Errorf("%w: the kappa-%d comparator's band on sums in [%.3g, %.3g] is %.3g, with the evaluation's error %.3g over the design's tolerance %.3g: a deeper comparator or a design with a wider gap",
			errs.ErrInvalid, lit.Kappa, c.Range[0], c.Range[1], band-lit.EvalError, lit.EvalError, c.Tolerance)
	}
	return cmp, nil
}

// comparator is classifier i's comparator: Sure, then Maybe.
func (pl *Pipeline) comparator(i int) *comparator.Comparator {
	if i == 1 {
		return pl.Maybe
	}
	return pl.Sure
}

// band is what the model treats as unsettled around classifier i's
// threshold (Bands).
func (pl *Pipeline) band(i int) float64 {
	return pl.Lit.band(pl.comparator(i), pl.Lit.classifiers()[i])
}

// band is classifier c's unsettled band with its comparator cmp: cmp's
// band on t, read on the sums, and EvalError.
func (lit Literal) band(cmp *comparator.Comparator, c Classifier) float64 {
	lo, hi := lit.Domain(c)
	return cmp.ValueBand*(hi-lo)/2 + lit.EvalError
}

// DesignLiteral is the classification of a python fold design (fold.
// ReadDesign) with the comparator depth kappa, the rotations per eye and
// the evaluation's error: groups of the design's k, sure on f's sums,
// maybe on h's (or f's).
func DesignLiteral(d *fold.Design, kappa, rotations int, evalError float64) Literal {
	mr, mt := d.MaybeRangeAndTolerance()
	return Literal{Kappa: kappa, Rotations: rotations, GroupSize: d.K, EvalError: evalError,
		Sure:  Classifier{At: d.SureAt, Range: d.SumRange, Tolerance: d.Tolerance},
		Maybe: &Classifier{At: d.MaybeAt, Range: mr, Tolerance: mt}}
}

// checkRange checks that every sum of up to k values of fold polynomial
// poly (its extrema measured by fold.NewParams; a shorter group sums
// fewer) lies in r.
func checkRange(fp *fold.Params, poly, k int, r [2]float64) error {
	top := fp.Lit.Tops()[poly]
	if !(r[0] < r[1]) || math.Abs(r[0]) > float64(k)*top*1.01 || math.Abs(r[1]) > float64(k)*top*1.01 {
		return fmt.Errorf("%w: a sum range [%v, %v] for sums of %d values bounded by %v", errs.ErrInvalid, r[0], r[1], k, top)
	}
	lo, hi := fp.Extrema(poly)
	// Sums of 1 to k values reach k min(lo, 0) and k max(hi, 0) at most;
	// the extrema are evaluated in floating point, so a range whose end is
	// the exact extremum passes within eps.
	eps := 1e-9 * math.Max(math.Abs(r[0]), math.Abs(r[1]))
	if s := float64(k) * math.Min(lo, 0); s < r[0]-eps {
		return fmt.Errorf("%w: sums reach %v below their range [%v, %v]", errs.ErrInvalid, s, r[0], r[1])
	}
	if s := float64(k) * math.Max(hi, 0); s > r[1]+eps {
		return fmt.Errorf("%w: sums reach %v above their range [%v, %v]", errs.ErrInvalid, s, r[0], r[1])
	}
	return nil
}

// groups are the fold groups of eye e: columns e*Rotations + r, r in
// [g*GroupSize, min((g+1)*GroupSize, Rotations)).
func (pl *Pipeline) groups(e int) [][]int {
	var out [][]int
	for lo := 0; lo < pl.Lit.Rotations; lo += pl.Lit.GroupSize {
		var cols []int
		for r := lo; r < min(lo+pl.Lit.GroupSize, pl.Lit.Rotations); r++ {
			cols = append(cols, e*pl.Lit.Rotations+r)
		}
		out = append(out, cols)
	}
	return out
}

// Stats reports what a Match did: the wall time of each stage and the
// counts.
type Stats struct {
	Wall                                        time.Duration
	Fold, Refresh, Classify, Reduce, Discretise time.Duration
	Groups, Refreshes, Classified               int
	ReductionBootstraps                         int
	// Discretised: the bits went through the Discretiser.
	Discretised bool
	// OnePerBootstrap: the layout with one eye per bootstrap (its fold
	// groups across the packed sums), taken when an eye has at least P
	// fold groups (the pair pass); otherwise P eyes per bootstrap.
	OnePerBootstrap bool
	// Bands are the classifiers' unsettled bands on the sums (the
	// comparator's and EvalError), sure then maybe.
	Bands []float64
}

// ResultSlot is the slot of Match's outputs that holds the i-th eye of
// its list, for a pipeline whose eyes have `groups` fold groups each
// (Pipeline.Groups).
func ResultSlot(s *scoreslots.Params, i, groups int) int {
	_, size, width := layout(s, groups)
	return irismatch.EyeSlot(i, size, width, s.Bootstrap.BootstrappingParameters.MaxSlots())
}

// layout is Match's packing for eyes of `groups` fold groups: P sums per
// bootstrap; with P or more groups, one eye per bootstrap (size 1, its
// chunk the whole ciphertext), else P eyes per bootstrap in chunks of
// N_db/2 slots.
func layout(s *scoreslots.Params, groups int) (pack, size, width int) {
	pack = s.Bootstrap.BootstrappingParameters.N() / s.Residual.N()
	slots := s.Bootstrap.BootstrappingParameters.MaxSlots()
	if groups >= pack {
		return pack, 1, slots
	}
	return pack, pack, slots / pack
}

// listEyes is eyes, or every eye of a result with cols columns if nil.
func (pl *Pipeline) listEyes(eyes []int, cols int) []int {
	if eyes != nil {
		return eyes
	}
	all := make([]int, cols/pl.Lit.Rotations)
	for e := range all {
		all[e] = e
	}
	return all
}

// Groups is the number of fold groups of an eye.
func (pl *Pipeline) Groups() int { return len(pl.groups(0)) }

// item is one fold group of one eye: the sums a refresh packs.
type item struct{ eye, group int }

// Match runs Algorithm 2 on a rescaled CCMM result of a slot-encoded
// database (rows: database codes in blocks of N_db; columns: eyes x
// Rotations) for the eyes listed (nil: every eye), with the public
// overlaps |m_row and m_col|. It returns two ciphertexts of the
// bootstrapping ring whose slot ResultSlot(i) holds the i-th listed eye's
// sure and maybe bits (maybe is nil without a maybe classifier;
// discretised, with a Discretiser, so that a sum inside a classifier's
// band gives 0 or 1 too), and every other slot 0.
//
// A job is one block and P items (eye, fold group): P folds, one refresh
// per fold polynomial, the classifications of the P sums. With fewer fold
// groups per eye than P, a job holds P eyes' same fold group (the last
// set repeats its last eye) and the reduction ORs within chunks of N_db/2
// slots; with P or more (the pair pass), a job holds P fold groups of one
// eye (its last job repeats its last group) and the reduction ORs across
// the whole ciphertext. Jobs run in batches whose refreshes bootstrap
// together (fold.Refresher.RefreshAll), up to irismatch.Batch bootstraps
// each, and every classifier's values go through one product tree.
func (pl *Pipeline) Match(res *ccmm.SharedA, eyes []int, overlap func(row, col int) int) (sure, maybe *rlwe.Ciphertext, st *Stats, err error) {
	n := pl.Fold.CKKS.N()
	if res.Cols%pl.Lit.Rotations != 0 || res.Rows%n != 0 || res.Rows/n != len(pl.folders) || res.Cols == 0 {
		return nil, nil, nil, fmt.Errorf("%w: a %dx%d result for %d rotations per eye and %d database blocks of %d codes",
			errs.ErrInvalid, res.Rows, res.Cols, pl.Lit.Rotations, len(pl.folders), n)
	}
	eyes = pl.listEyes(eyes, res.Cols)
	for _, e := range eyes {
		if e < 0 || e >= res.Cols/pl.Lit.Rotations {
			return nil, nil, nil, fmt.Errorf("%w: eye %d of a result with %d", errs.ErrInvalid, e, res.Cols/pl.Lit.Rotations)
		}
	}
	if len(eyes) == 0 {
		return nil, nil, nil, fmt.Errorf("%w: no eyes to match", errs.ErrInvalid)
	}
	blocks := res.Rows / n
	perEye := pl.Groups()
	pack, size, width := layout(pl.Slots, perEye)
	classifiers := pl.Lit.classifiers()
	st = &Stats{OnePerBootstrap: size == 1}
	for i := range classifiers {
		st.Bands = append(st.Bands, pl.band(i))
	}
	// sets[g] are the items of reduction group g's jobs, P at a time.
	var sets [][]item
	if st.OnePerBootstrap {
		for _, e := range eyes {
			var set []item
			for h := 0; h < perEye || len(set)%pack != 0; h++ {
				set = append(set, item{e, min(h, perEye-1)})
			}
			sets = append(sets, set)
		}
	} else {
		for lo := 0; lo < len(eyes); lo += pack {
			var set []item
			for h := range perEye {
				for u := range pack {
					set = append(set, item{eyes[min(lo+u, len(eyes)-1)], h})
				}
			}
			sets = append(sets, set)
		}
	}
	begin := time.Now()
	var jobs []job
	for g, set := range sets {
		for t := range blocks {
			for lo := 0; lo < len(set); lo += pack {
				jobs = append(jobs, job{set: g, block: t, items: set[lo : lo+pack]})
			}
		}
	}
	values := make([][][]*rlwe.Ciphertext, len(classifiers)) // classifier, reduction group
	for c := range values {
		values[c] = make([][]*rlwe.Ciphertext, len(sets))
	}
	// The jobs run in batches as even as they can be, so that the
	// refreshes of a batch (up to irismatch.Batch) bootstrap together.
	perBatch := max(1, irismatch.Batch/len(pl.Fold.Lit.Polynomials()))
	batches := (len(jobs) + perBatch - 1) / perBatch
	for b := range batches {
		batch := jobs[b*len(jobs)/batches : (b+1)*len(jobs)/batches]
		vs, err := pl.run(res, batch, overlap, st)
		if err != nil {
			return nil, nil, nil, err
		}
		for k, j := range batch {
			for c := range vs[k] {
				values[c][j.set] = append(values[c][j.set], vs[k][c]...)
			}
		}
	}
	start := time.Now()
	red, err := irismatch.NewReducer(pl.evals[0])
	if err != nil {
		return nil, nil, nil, err
	}
	// Every classifier's groups go through one product tree, so that their
	// bootstraps (and bundles) are shared two by two.
	var all [][]*rlwe.Ciphertext
	for c := range classifiers {
		all = append(all, values[c]...)
	}
	bits, err := red.AnyMatch(all, width)
	if err != nil {
		return nil, nil, nil, err
	}
	out := make([]*rlwe.Ciphertext, 2)
	for c := range classifiers {
		if out[c], err = red.Gather(bits[c*len(sets):(c+1)*len(sets)], len(eyes), size, width); err != nil {
			return nil, nil, nil, err
		}
	}
	st.Reduce = time.Since(start)
	if pl.Discretiser != nil {
		// One discretisation per classifier, side by side: each runs its
		// transforms on one core.
		start = time.Now()
		if err := parallel.For(len(classifiers), func(c int) (err error) {
			out[c], err = pl.Discretiser.Apply(out[c])
			return err
		}); err != nil {
			return nil, nil, nil, err
		}
		st.Discretise, st.Discretised = time.Since(start), true
	}
	st.ReductionBootstraps = red.Bootstraps()
	st.Wall = time.Since(begin)
	return out[0], out[1], st, nil
}

// job is P items of one reduction group's set and one database block:
// their folds, one refresh per fold polynomial, their classifications.
type job struct {
	set, block int
	items      []item
}

// run folds the items of every job, refreshes their sums (one bootstrap
// per job and fold polynomial, all of them together) and returns, per job,
// each classifier's match values.
func (pl *Pipeline) run(res *ccmm.SharedA, jobs []job, overlap func(row, col int) int, st *Stats) ([][][]*rlwe.Ciphertext, error) {
	start := time.Now()
	polys := len(pl.Fold.Lit.Polynomials())
	var in []fold.Sums // job-major, then polynomial
	for _, j := range jobs {
		sums := make([]fold.Sums, polys)
		for i := range sums {
			sums[i] = fold.Sums{Block: j.block, Poly: i}
		}
		for _, it := range j.items {
			out, err := pl.folders[j.block].Group(res, j.block, pl.groups(it.eye)[it.group], overlap)
			if err != nil {
				return nil, fmt.Errorf("fold: %w", err)
			}
			for i := range out {
				sums[i].Sums = append(sums[i].Sums, out[i])
			}
			st.Groups++
		}
		in = append(in, sums...)
	}
	st.Fold += time.Since(start)
	start = time.Now()
	refreshed, err := pl.refresher.RefreshAll(in)
	if err != nil {
		return nil, fmt.Errorf("refresh: %w", err)
	}
	st.Refreshes += len(in)
	st.Refresh += time.Since(start)
	start = time.Now()
	classifiers := pl.Lit.classifiers()
	out := make([][][]*rlwe.Ciphertext, len(jobs))
	for k := range out {
		out[k] = make([][]*rlwe.Ciphertext, len(classifiers))
	}
	err = parallel.For(len(jobs)*len(classifiers), func(n int) (err error) {
		k, i := n/len(classifiers), n%len(classifiers)
		lo, hi := pl.Lit.Domain(classifiers[i])
		out[k][i], err = pl.classify(pl.comparator(i), (lo+hi)/(hi-lo), refreshed[k*polys+pl.poly(i)])
		return err
	})
	if err != nil {
		return nil, err
	}
	for k := range out {
		for i := range out[k] {
			st.Classified += len(out[k][i])
		}
	}
	st.Classify += time.Since(start)
	return out, nil
}

// classify splits a refreshed ciphertext (slot m of chunk j: (S_lo + i
// S_hi) / (hi - lo)) into its two real halves, 2 S / (hi - lo) (one
// conjugation), subtracts shift = (lo + hi) / (hi - lo) to put them on
// [-1, 1], and returns the comparator's match values of each.
func (pl *Pipeline) classify(cmp *comparator.Comparator, shift float64, z *rlwe.Ciphertext) ([]*rlwe.Ciphertext, error) {
	bp := pl.Slots.Bootstrap.BootstrappingParameters
	keys := pl.evals[0].Evaluator.EvaluationKeySet
	eval := ckks.NewEvaluator(bp, keys)
	re, im, err := fold.Split(eval, z)
	if err != nil {
		return nil, err
	}
	halves := []*rlwe.Ciphertext{re, im}
	for _, h := range halves {
		if err := eval.Add(h, -shift, h); err != nil {
			return nil, err
		}
	}
	err = parallel.For(len(halves), func(i int) (err error) {
		pe := polynomial.NewEvaluator(bp, ckks.NewEvaluator(bp, keys))
		halves[i], err = cmp.Evaluate(pe, halves[i], bp.DefaultScale())
		if err != nil {
			return fmt.Errorf("classification: %w", err)
		}
		return nil
	})
	return halves, err
}

// Answer is what the receiver reads from an eye's two bits.
type Answer int

// The three answers: a flagged eye goes to the pair pass (PairFold).
const (
	NoMatch Answer = iota
	Match
	Flagged
)

// Read turns an eye's sure and maybe bits into its answer.
func Read(sure, maybe bool) Answer {
	switch {
	case sure:
		return Match
	case !maybe:
		return NoMatch
	}
	return Flagged
}

// Eye is the plaintext model of one query eye: whether some slot's sum
// reaches each threshold, and whether the encrypted bit must equal it
// (Settled: every sum lies farther than the comparator's band and the
// evaluation's error from the threshold, or one lies that far above it).
// Without a maybe classifier, Maybe and MaybeSettled are false.
type Eye struct {
	Sure, Maybe               bool
	SureSettled, MaybeSettled bool
}

// Model is Match's plaintext model on the exact products dots (rows:
// database codes, columns: eyes x Rotations) with the overlaps, for the
// eyes listed (nil: every eye).
func (pl *Pipeline) Model(dots ccmm.IntMat, eyes []int, overlap func(row, col int) int) []Eye {
	n := pl.Fold.CKKS.N()
	eyes = pl.listEyes(eyes, dots.Cols)
	classifiers := pl.Lit.classifiers()
	bands := make([]float64, len(classifiers))
	for c := range bands {
		bands[c] = pl.band(c)
	}
	out := make([]Eye, len(eyes))
	for i, e := range eyes {
		// per classifier: some sum >= At, some sum >= At + band, some sum
		// within the band
		var above, clear, near [2]bool
		for t := range dots.Rows / n {
			for _, cols := range pl.groups(e) {
				sums := pl.Fold.GroupModel(dots, t, cols, overlap)
				for c, cl := range classifiers {
					for _, s := range sums[pl.poly(c)] {
						above[c] = above[c] || s >= cl.At
						clear[c] = clear[c] || s >= cl.At+bands[c]
						near[c] = near[c] || math.Abs(s-cl.At) <= bands[c]
					}
				}
			}
		}
		out[i] = Eye{Sure: above[0], SureSettled: clear[0] || !near[0]}
		if len(classifiers) > 1 {
			out[i].Maybe, out[i].MaybeSettled = above[1], clear[1] || !near[1]
		}
	}
	return out
}

// PairFold is the fold of the pair pass (Algorithm 1 on a slot-encoded
// database) at score threshold delta: f(x) = x on [-1 - delta, 1 -
// delta], so that with groups of one rotation every sum is one pair's x =
// score - delta; with PairClassifier it classifies every pair alone.
func PairFold(delta float64) fold.Literal {
	lo, hi := -1-delta, 1-delta
	return fold.Literal{Delta: delta, Top: math.Max(-lo, hi),
		Poly: fold.Polynomial{Lo: lo, Hi: hi, Chebyshev: []float64{(lo + hi) / 2, (hi - lo) / 2}}}
}

// PairClassifier is the pair pass's classifier at delta: x >= 0, on
// every x a pair can have, with the given tolerance (a pair farther than
// it from the threshold gets its exact bit).
func PairClassifier(delta, tolerance float64) Classifier {
	return Classifier{At: 0, Range: [2]float64{-1 - delta, 1 - delta}, Tolerance: tolerance}
}
