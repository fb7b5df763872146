package irismatch

import (
	"fmt"
	"slices"
	"sync/atomic"

	"encmatch/core/base/errs"
	"encmatch/core/base/parallel"
	"encmatch/core/iris/dftbatch"
	"encmatch/core/iris/fold"
	"encmatch/core/iris/scoreslots"

	"github.com/tuneinsight/lattigo/v6/circuits/ckks/bootstrapping"
	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// Reducer turns match values in [0, 1] into one bit per query eye:
// OR(v) = 1 - prod(1 - v), the product taken pairwise across ciphertexts,
// then across the slots of the last one by rotations of 1, 2, 4, ... The
// products keep every value in [0, 1] whatever the inputs, so a match value
// strictly between 0 and 1 (a pair inside the comparator's band) gives an
// eye value in [0, 1], never an out-of-range one. A ciphertext with fewer
// than two levels left is bootstrapped (Lattigo's full bootstrap in the
// ring N2) and cleaned before its next product.
//
// Many match values that all need a bootstrap at one step of the product
// tree (the comparator's outputs of the fold's pair pass arrive with no
// level left) go through it in bundles instead (bundler): their sum, one
// bootstrap, and a threshold test at 1/2 on it.
type Reducer struct {
	params     ckks.Parameters
	eval       *ckks.Evaluator
	btp        *bootstrapping.Evaluator
	bundle     *bundler // nil: no comparator fits the levels a bootstrap leaves
	bootstraps atomic.Int64
}

// Bootstraps is the number of bootstraps run so far (for the benchmark's
// report; a pair of ciphertexts bootstrapped together counts once).
func (r *Reducer) Bootstraps() int { return int(r.bootstraps.Load()) }

// ReducerGaloisElements are the Galois elements the reduction's rotations
// need after the half-bootstraps of p: rotations by 2^i below the chunk
// width (the products within a chunk, and Gather's rotation of group g,
// g below the width).
func ReducerGaloisElements(p *scoreslots.Params) []uint64 {
	params := p.Bootstrap.BootstrappingParameters
	var rots []int
	for r := 1; r < chunkWidth(p); r *= 2 {
		rots = append(rots, r)
	}
	return params.GaloisElements(rots)
}

// packing is the number of result ciphertexts one half-bootstrap of p packs.
func packing(p *scoreslots.Params) int { return 1 << (p.Lit.LogN2 - p.CCMM.Lit.LogNDB) }

// chunkWidth is the slots of one packed input after a half-bootstrap of p.
func chunkWidth(p *scoreslots.Params) int {
	return p.Bootstrap.BootstrappingParameters.MaxSlots() / packing(p)
}

// NewReducer makes a reducer in the bootstrapping ring of btp with its
// keys (relinearisation and the rotations of ReducerGaloisElements).
func NewReducer(btp *bootstrapping.Evaluator) (*Reducer, error) {
	b, err := newBundler(btp.ResidualParameters.MaxLevel())
	if err != nil {
		return nil, err
	}
	return &Reducer{params: btp.BootstrappingParameters, eval: btp.Evaluator, btp: btp, bundle: b}, nil
}

// refresh replaces every ciphertext of cts below level minLevel by its
// bootstrap, cleaned (minLevel is at least 2: a bootstrap starts from level 1 or
// more, as Lattigo's bootstrap of a ciphertext at level 0 needs its scale to
// be an exact power of two, which products of drifting scales are not; from
// level 1 it matches the scale itself). It reports which ciphertexts it
// replaced.
func (r *Reducer) refresh(cts []*rlwe.Ciphertext, minLevel int) ([]bool, error) {
	fresh := make([]bool, len(cts))
	var low []int
	for i, ct := range cts {
		if ct.Level() < minLevel {
			low = append(low, i)
			fresh[i] = true
		}
	}
	return fresh, r.bootstrapAll(cts, low, r.finishClean)
}

// finish turns a bootstrap's output into what replaces its input: one
// value, or two when the bootstrap carried a pair (z = a + i b).
type finish func(z *rlwe.Ciphertext, paired bool) (a, b *rlwe.Ciphertext, err error)

// finishClean is refresh's finish: the cleaned values.
func (r *Reducer) finishClean(z *rlwe.Ciphertext, paired bool) (a, b *rlwe.Ciphertext, err error) {
	if paired {
		return r.split(z)
	}
	a, err = r.clean(z, false)
	return a, nil, err
}

// bootstrapAll replaces the ciphertexts of cts at the indices low by the
// finish of their bootstraps. Two ciphertexts at the same level and scale
// share one bootstrap: their values are real, so z = a + i b carries both,
// and after the bootstrap z + conj(z) = 2a and -i (z - conj(z)) = 2b. The
// bootstraps run together, a DFT factor at a time (package dftbatch).
func (r *Reducer) bootstrapAll(cts []*rlwe.Ciphertext, low []int, done finish) error {
	var jobs [][]int
	for len(low) > 0 {
		i, mate := low[0], -1
		for k, j := range low[1:] {
			if alike(cts[j], cts[i]) {
				mate = k + 1
				break
			}
		}
		if mate < 0 {
			jobs, low = append(jobs, []int{i}), low[1:]
			continue
		}
		jobs = append(jobs, []int{i, low[mate]})
		low = append(low[1:mate], low[mate+1:]...)
	}
	for lo := 0; lo < len(jobs); lo += Batch {
		if err := r.bootstrapJobs(cts, jobs[lo:min(lo+Batch, len(jobs))], done); err != nil {
			return err
		}
	}
	return nil
}

// alike says whether a and b are at the same level and scale: they can be
// added, and share a bootstrap.
func alike(a, b *rlwe.Ciphertext) bool {
	return a.Level() == b.Level() && a.Scale.Equal(b.Scale)
}

// bootstrapJobs bootstraps the ciphertexts of cts that jobs name, one or
// two per bootstrap, all bootstraps together, and replaces them by their
// finish.
func (r *Reducer) bootstrapJobs(cts []*rlwe.Ciphertext, jobs [][]int, done finish) error {
	// A pair's a and b (real values) travel as z = a + i b (a Gaussian
	// integer product: exact, no level).
	in := make([]*rlwe.Ciphertext, len(jobs))
	err := parallel.For(len(jobs), func(k int) (err error) {
		job := jobs[k]
		if len(job) == 1 {
			in[k] = cts[job[0]]
			return nil
		}
		if in[k], err = r.eval.MulNew(cts[job[1]], 1i); err != nil {
			return err
		}
		return r.eval.Add(in[k], cts[job[0]], in[k])
	})
	if err != nil {
		return err
	}
	r.bootstraps.Add(int64(len(jobs)))
	out, err := dftbatch.Bootstrap(r.btp, in)
	if err != nil {
		return fmt.Errorf("bootstrap in the reduction: %w", err)
	}
	return parallel.For(len(jobs), func(k int) (err error) {
		job := jobs[k]
		a, b, err := done(out[k], len(job) == 2)
		if err != nil {
			return err
		}
		cts[job[0]] = a
		if len(job) == 2 {
			cts[job[1]] = b
		}
		return nil
	})
}

// split returns the cleaned a and b of a bootstrapped z = a + i b:
// z + conj(z) = 2a and -i (z - conj(z)) = 2b, cleaned from their doubles.
func (r *Reducer) split(z *rlwe.Ciphertext) (*rlwe.Ciphertext, *rlwe.Ciphertext, error) {
	re, im, err := fold.Split(r.eval, z)
	if err != nil {
		return nil, nil, err
	}
	if re, err = r.clean(re, true); err != nil {
		return nil, nil, err
	}
	im, err = r.clean(im, true)
	return re, im, err
}

// clean applies h(x) = 3x^2 - 2x^3 (two levels), which maps [0, 1] onto
// itself and an error e near 0 or 1 to 3e^2 - 2e^3: a bootstrap's error on
// values near 0 or 1 (about 2^-15 at the toy ring), which the products over
// hundreds of thousands of slots would add up, drops below 10^-8. With
// doubled, x holds 2v and the result is h(v) = (2v)^2 (3 - 2v) / 4, still
// two levels (the quarter is a constant product on the second factor,
// which has a level to spare).
func (r *Reducer) clean(x *rlwe.Ciphertext, doubled bool) (*rlwe.Ciphertext, error) {
	if x.Level() < 2 {
		return nil, fmt.Errorf("%w: cleaning needs 2 levels, the ciphertext has %d", errs.ErrInvalid, x.Level())
	}
	x2, err := r.eval.MulRelinNew(x, x)
	if err != nil {
		return nil, err
	}
	if err := r.eval.Rescale(x2, x2); err != nil {
		return nil, err
	}
	// t = 3 - 2x; when x holds 2v, t = (3 - 2v) / 4 = (3 - x) / 4 (the
	// quarter, a constant product, spends the level t has to spare).
	slope := -2
	if doubled {
		slope = -1
	}
	t, err := r.eval.MulNew(x, slope)
	if err != nil {
		return nil, err
	}
	if err := r.eval.Add(t, 3, t); err != nil {
		return nil, err
	}
	if doubled {
		if err := r.eval.Mul(t, 0.25, t); err != nil {
			return nil, err
		}
		if err := r.eval.Rescale(t, t); err != nil {
			return nil, err
		}
	}
	out, err := r.eval.MulRelinNew(x2, t)
	if err != nil {
		return nil, err
	}
	return out, r.eval.Rescale(out, out)
}

// mul returns a * b, relinearised and rescaled (both at level 2 or more).
func (r *Reducer) mul(a, b *rlwe.Ciphertext) (*rlwe.Ciphertext, error) {
	out, err := r.eval.MulRelinNew(a, b)
	if err != nil {
		return nil, err
	}
	return out, r.eval.Rescale(out, out)
}

// complement returns 1 - v.
func (r *Reducer) complement(v *rlwe.Ciphertext) (*rlwe.Ciphertext, error) {
	w, err := r.eval.MulNew(v, -1)
	if err != nil {
		return nil, err
	}
	return w, r.eval.Add(w, 1, w)
}

// AnyMatch reduces the match values of several groups of query eyes, laid
// out in chunks of width slots (chunk u of every input of a group holds
// values of one query eye, the same eye in every input of the group): the
// slot at the start of chunk u of output g holds 1 - prod over group g's
// inputs and chunk u's slots of (1 - v), 1 if some value of that eye is 1,
// 0 if every one is 0. Other slots hold products that straddle two chunks:
// Gather masks them away. The groups go through the product tree together,
// so that the ciphertexts that need a bootstrap at the same step share them
// two by two (refresh).
func (r *Reducer) AnyMatch(groups [][]*rlwe.Ciphertext, width int) ([]*rlwe.Ciphertext, error) {
	if width < 1 || width&(width-1) != 0 || width > r.params.MaxSlots() {
		return nil, fmt.Errorf("%w: chunks of %d slots (a power of two up to %d)", errs.ErrInvalid, width, r.params.MaxSlots())
	}
	ws := make([][]*rlwe.Ciphertext, len(groups))
	for g, vs := range groups {
		if len(vs) == 0 {
			return nil, fmt.Errorf("%w: no match values to reduce in group %d", errs.ErrInvalid, g)
		}
		ws[g] = make([]*rlwe.Ciphertext, len(vs))
		for i, v := range vs {
			var err error
			if ws[g][i], err = r.complement(v); err != nil {
				return nil, err
			}
		}
	}
	// The product across each group's ciphertexts, pairwise, a layer at a
	// time over all groups; many that need a bootstrap at once go through
	// bundles.
	for {
		var err error
		if ws, err = r.bundleLow(ws); err != nil {
			return nil, err
		}
		var operands []*rlwe.Ciphertext
		var pairs [][2]int // group, index of the first factor
		for g := range ws {
			for i := 0; i+1 < len(ws[g]); i += 2 {
				operands = append(operands, ws[g][i], ws[g][i+1])
				pairs = append(pairs, [2]int{g, i})
			}
		}
		if len(pairs) == 0 {
			break
		}
		if _, err := r.refresh(operands, 2); err != nil {
			return nil, err
		}
		prods := make([]*rlwe.Ciphertext, len(pairs))
		if err := parallel.For(len(pairs), func(k int) (err error) {
			prods[k], err = r.mul(operands[2*k], operands[2*k+1])
			return err
		}); err != nil {
			return nil, err
		}
		next := make([][]*rlwe.Ciphertext, len(ws))
		for k, p := range pairs {
			next[p[0]] = append(next[p[0]], prods[k])
		}
		for g := range ws {
			if len(ws[g])%2 == 1 {
				next[g] = append(next[g], ws[g][len(ws[g])-1])
			}
		}
		ws = next
	}
	w := make([]*rlwe.Ciphertext, len(ws))
	for g := range ws {
		w[g] = ws[g][0]
	}
	// The product across the slots of each chunk: rotations by 1, 2, 4, ...
	for step := 1; step < width; step *= 2 {
		if _, err := r.refresh(w, 2); err != nil {
			return nil, err
		}
		if err := parallel.For(len(w), func(g int) error {
			rot, err := r.eval.RotateNew(w[g], step)
			if err != nil {
				return err
			}
			w[g], err = r.mul(w[g], rot)
			return err
		}); err != nil {
			return nil, err
		}
	}
	// A last cleaning takes the sum of the match values' small errors off
	// the eye's value (a bootstrap cleans by itself).
	fresh, err := r.refresh(w, 3)
	if err != nil {
		return nil, err
	}
	for g := range w {
		if !fresh[g] {
			if w[g], err = r.clean(w[g], false); err != nil {
				return nil, err
			}
		}
		if w[g], err = r.complement(w[g]); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// EyeSlot is the slot of Gather's output that holds eye e when eyes come
// in groups of size per ciphertext, each eye in a chunk of width slots:
// eye g*size + u is at slot u*width - g (modulo the slots).
func EyeSlot(e, size, width, slots int) int {
	g, u := e/size, e%size
	return ((u*width-g)%slots + slots) % slots
}

// Gather packs the outputs of AnyMatch, one per group of size eyes
// (groups[g]: eye g*size + u at the start of chunk u, for the first eyes
// of them), into one ciphertext holding eye e at EyeSlot and 0 elsewhere:
// a mask of the chunk starts (one level, the straddling products dropped),
// then a rotation by g (powers of two, the reduction's keys), then a sum.
func (r *Reducer) Gather(groups []*rlwe.Ciphertext, eyes, size, width int) (*rlwe.Ciphertext, error) {
	slots := r.params.MaxSlots()
	if eyes < 1 || size < 1 || size*width > slots || len(groups) != (eyes+size-1)/size || len(groups) > width {
		return nil, fmt.Errorf("%w: %d eyes in %d groups of %d chunks of %d slots", errs.ErrInvalid, eyes, len(groups), size, width)
	}
	groups = slices.Clone(groups)
	if _, err := r.refresh(groups, 2); err != nil {
		return nil, err
	}
	level := -1
	for _, b := range groups {
		if level < 0 || b.Level() < level {
			level = b.Level()
		}
	}
	enc := ckks.NewEncoder(r.params)
	var out *rlwe.Ciphertext
	for g, b := range groups {
		b = r.eval.DropLevelNew(b, b.Level()-level)
		mask := make([]float64, slots)
		for u := 0; u < size && g*size+u < eyes; u++ {
			mask[u*width] = 1
		}
		pt := ckks.NewPlaintext(r.params, level)
		pt.Scale = r.params.DefaultScale().Mul(rlwe.NewScale(r.params.Q()[level])).Div(b.Scale)
		if err := enc.Encode(mask, pt); err != nil {
			return nil, err
		}
		m, err := r.eval.MulNew(b, pt)
		if err != nil {
			return nil, err
		}
		if err := r.eval.Rescale(m, m); err != nil {
			return nil, err
		}
		m.Scale = r.params.DefaultScale()
		for bit := 1; bit <= g; bit *= 2 {
			if g&bit != 0 {
				if err := r.eval.Rotate(m, bit, m); err != nil {
					return nil, err
				}
			}
		}
		if out == nil {
			out = m
		} else if err := r.eval.Add(out, m, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}
