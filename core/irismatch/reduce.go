package irismatch

import (
	"fmt"

	"encmatch/core/errs"
	"encmatch/core/scoreslots"

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
type Reducer struct {
	params ckks.Parameters
	eval   *ckks.Evaluator
	btp    *bootstrapping.Evaluator
	// Bootstraps counts the bootstraps run (for the benchmark's report).
	Bootstraps int
}

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
func NewReducer(btp *bootstrapping.Evaluator) *Reducer {
	return &Reducer{params: btp.BootstrappingParameters, eval: btp.Evaluator, btp: btp}
}

// level1 returns ct if it has a level to spend and one more, else its
// bootstrap, cleaned. The spare level is the bootstrap's: Lattigo's
// bootstrap of a ciphertext at level 0 needs its scale to be an exact
// power of two, which products of drifting scales are not; from level 1 it
// matches the scale itself.
func (r *Reducer) level1(ct *rlwe.Ciphertext) (*rlwe.Ciphertext, error) {
	if ct.Level() >= 2 {
		return ct, nil
	}
	return r.bootstrap(ct)
}

// bootstrap returns ct bootstrapped and cleaned.
func (r *Reducer) bootstrap(ct *rlwe.Ciphertext) (*rlwe.Ciphertext, error) {
	r.Bootstraps++
	out, err := r.btp.Evaluate(ct)
	if err != nil {
		return nil, fmt.Errorf("bootstrap in the reduction: %w", err)
	}
	return r.clean(out)
}

// clean applies h(x) = 3x^2 - 2x^3 (two levels), which maps [0, 1] onto
// itself and an error e near 0 or 1 to 3e^2 - 2e^3: a bootstrap's error on
// values near 0 or 1 (about 2^-15 at the toy ring), which the products over
// hundreds of thousands of slots would add up, drops below 10^-8.
func (r *Reducer) clean(x *rlwe.Ciphertext) (*rlwe.Ciphertext, error) {
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
	t, err := r.eval.MulNew(x, -2)
	if err != nil {
		return nil, err
	}
	if err := r.eval.Add(t, 3, t); err != nil {
		return nil, err
	}
	out, err := r.eval.MulRelinNew(x2, t)
	if err != nil {
		return nil, err
	}
	return out, r.eval.Rescale(out, out)
}

// mul returns a * b, relinearised and rescaled.
func (r *Reducer) mul(a, b *rlwe.Ciphertext) (*rlwe.Ciphertext, error) {
	var err error
	if a, err = r.level1(a); err != nil {
		return nil, err
	}
	if b, err = r.level1(b); err != nil {
		return nil, err
	}
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

// AnyMatch reduces match values laid out in chunks of width slots (chunk
// u of every input holds values of one query eye, the same eye in every
// input): the slot at the start of chunk u of the output holds
// 1 - prod over the inputs and chunk u's slots of (1 - v), 1 if some value
// of that eye is 1, 0 if every one is 0. Other slots hold products that
// straddle two chunks: Gather masks them away.
func (r *Reducer) AnyMatch(vs []*rlwe.Ciphertext, width int) (*rlwe.Ciphertext, error) {
	if len(vs) == 0 {
		return nil, fmt.Errorf("%w: no match values to reduce", errs.ErrInvalid)
	}
	if width < 1 || width&(width-1) != 0 || width > r.params.MaxSlots() {
		return nil, fmt.Errorf("%w: chunks of %d slots (a power of two up to %d)", errs.ErrInvalid, width, r.params.MaxSlots())
	}
	ws := make([]*rlwe.Ciphertext, len(vs))
	for i, v := range vs {
		var err error
		if ws[i], err = r.complement(v); err != nil {
			return nil, err
		}
	}
	for len(ws) > 1 {
		next := ws[:0:0]
		for i := 0; i+1 < len(ws); i += 2 {
			p, err := r.mul(ws[i], ws[i+1])
			if err != nil {
				return nil, err
			}
			next = append(next, p)
		}
		if len(ws)%2 == 1 {
			next = append(next, ws[len(ws)-1])
		}
		ws = next
	}
	w := ws[0]
	for step := 1; step < width; step *= 2 {
		var err error
		if w, err = r.level1(w); err != nil {
			return nil, err
		}
		rot, err := r.eval.RotateNew(w, step)
		if err != nil {
			return nil, err
		}
		if w, err = r.mul(w, rot); err != nil {
			return nil, err
		}
	}
	// A last cleaning takes the sum of the match values' small errors off
	// the eye's value (a bootstrap cleans by itself).
	var err error
	if w.Level() < 3 {
		w, err = r.bootstrap(w)
	} else {
		w, err = r.clean(w)
	}
	if err != nil {
		return nil, err
	}
	return r.complement(w)
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
	level := -1
	for i, b := range groups {
		var err error
		if groups[i], err = r.level1(b); err != nil {
			return nil, err
		}
		if level < 0 || groups[i].Level() < level {
			level = groups[i].Level()
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
