package irismatch

import (
	"fmt"
	"math"
	"math/big"

	"encmatch/core/base/comparator"
	"encmatch/core/base/errs"
	"encmatch/core/base/parallel"
	"encmatch/core/iris/fold"

	"github.com/tuneinsight/lattigo/v6/circuits/ckks/polynomial"
	"github.com/tuneinsight/lattigo/v6/core/rlwe"
)

// bundler is the reduction's way through many match values that all need a
// bootstrap at the same step (the fold's pair pass leaves its sixteen
// comparator outputs per eye with no level; bootstrapped two by two they
// cost eight bootstraps per eye). Up to Size values v_1..v_n of one group,
// at one level and scale, are added (no level): s = sum v_i. One bootstrap
// carries x = (s - 1/2) / (2 Size) (a constant and a change of the scale's
// label, no level; two bundles share it as z = x_a + i x_b), the split
// doubles it, and a threshold test at 0 (the comparator of depth Kappa at
// delta 0) gives the bundle's match value: 1 if some v_i is 1, 0 if every
// one is 0, a value in [0, 1] otherwise (a value inside a comparator's band
// among non-matches). With every v_i within LeafError of 0, 2x <= -(1/2 -
// n LeafError) / Size; with one within LeafError of 1 and the others at
// least -LeafError, 2x >= (1/2 - n LeafError) / Size: newBundler takes the
// largest Size whose margin, less the bootstrap's error (also LeafError),
// holds the comparator's value band, for the smallest depth that leaves
// two levels after a bootstrap (the next product, and one to spare).
type bundler struct {
	Size int
	cmp  *comparator.Comparator
}

// LeafError is the error a bundle allows each match value, and the
// bootstrap on x: 2^-12. The comparator's outputs are within 2^-21 of 0 or
// 1 outside its band (comparator.ValueTolerance) plus the CKKS noise of
// its evaluation, and the products of the tree keep cleaned values within
// 10^-8 (Reducer.clean); the bootstrap's error on x is under 2^-15 at the
// iris sizes (docs/IRIS.md).
const LeafError = 1.0 / (1 << 12)

// minBundle is the fewest values a bundle takes. n values two by two cost
// n/2 bootstraps and leave their cleaned outputs 11 levels to go on with
// (at the iris presets); a bundle costs half a bootstrap (two share one), a
// comparator, and leaves 2 levels, which brings the next bootstrap about
// 9/11 of one sooner: about 1.5 bootstraps, less than n/2 from n = 4.
const minBundle = 4

// newBundler picks the bundle size and comparator for bootstraps that
// leave `levels` levels (nil when no comparator fits).
func newBundler(levels int) (*bundler, error) {
	lo, hi := comparator.KappaRange()
	for size := 64; size >= 4; size /= 2 {
		margin := (0.5-float64(size)*LeafError)/float64(size) - LeafError
		for kappa := lo; kappa <= min(hi, levels-2); kappa++ {
			cmp, err := comparator.New(kappa, 0, 1)
			if err != nil {
				return nil, err
			}
			if cmp.ValueBand < margin {
				return &bundler{Size: size, cmp: cmp}, nil
			}
		}
	}
	return nil, nil
}

// bundleLow replaces, in every group of ws (the complements w = 1 - v of
// match values), the ciphertexts below level 2 that share a level and a
// scale, when there are at least minBundle of them, by the complements of
// their bundles' match values (in bundles of at most Size, as even as
// they can be). The bundles of every group share bootstraps two by two.
func (r *Reducer) bundleLow(ws [][]*rlwe.Ciphertext) ([][]*rlwe.Ciphertext, error) {
	if r.bundle == nil {
		return ws, nil
	}
	type bundle struct {
		group   int
		members []*rlwe.Ciphertext
	}
	var bundles []bundle
	out := make([][]*rlwe.Ciphertext, len(ws))
	for g, cts := range ws {
		taken := make([]bool, len(cts))
		for i, ct := range cts {
			if taken[i] || ct.Level() >= 2 {
				continue
			}
			class := []int{i}
			for j := i + 1; j < len(cts); j++ {
				if !taken[j] && alike(cts[j], ct) {
					class = append(class, j)
				}
			}
			if len(class) < minBundle {
				continue
			}
			n := (len(class) + r.bundle.Size - 1) / r.bundle.Size
			for k := range n {
				var members []*rlwe.Ciphertext
				for _, j := range class[k*len(class)/n : (k+1)*len(class)/n] {
					members = append(members, cts[j])
					taken[j] = true
				}
				bundles = append(bundles, bundle{g, members})
			}
		}
		for i, ct := range cts {
			if !taken[i] {
				out[g] = append(out[g], ct)
			}
		}
	}
	if len(bundles) == 0 {
		return ws, nil
	}
	xs := make([]*rlwe.Ciphertext, len(bundles))
	if err := parallel.For(len(bundles), func(k int) (err error) {
		xs[k], err = r.bundleInput(bundles[k].members)
		return err
	}); err != nil {
		return nil, err
	}
	all := make([]int, len(xs))
	for k := range all {
		all[k] = k
	}
	if err := r.bootstrapAll(xs, all, r.finishBundle); err != nil {
		return nil, err
	}
	for k, b := range bundles {
		out[b.group] = append(out[b.group], xs[k])
	}
	return out, nil
}

// bundleInput returns x = (n - 1/2 - sum w_i) / (2 Size) = (s - 1/2) /
// (2 Size) for the complements w_i = 1 - v_i of a bundle of n values (one
// level and scale): sums, a constant, and the scale's label multiplied by
// 2 Size (a power of two, so a scale that was one stays one, which a
// bootstrap from level 0 needs: Lattigo's ScaleDown multiplies by the
// integer nearest to q0 / (scale MessageRatio), the bootstrap labels the
// factor that leaves, dftbatch.Bootstrap, but a scale far from a power of
// two takes the message away from the ratio EvalMod is built for). At
// level 0 a scale within 2^-40 of a power of two (the rescales' big-float
// quotients leave such scales) is taken as that power of two, a change of
// the values by less than 2^-40 of themselves; another is refused.
func (r *Reducer) bundleInput(ws []*rlwe.Ciphertext) (*rlwe.Ciphertext, error) {
	scale := ws[0].Scale
	if ws[0].Level() == 0 {
		var ok bool
		if scale, ok = nearPowerOfTwo(scale); !ok {
			return nil, fmt.Errorf("%w: a bundle at level 0 with a scale of %v, not a power of two", errs.ErrInvalid, &ws[0].Scale.Value)
		}
	}
	x := ws[0].CopyNew()
	for _, w := range ws[1:] {
		if err := r.eval.Add(x, w, x); err != nil {
			return nil, err
		}
	}
	if err := r.eval.Mul(x, -1, x); err != nil {
		return nil, err
	}
	if err := r.eval.Add(x, float64(len(ws))-0.5, x); err != nil {
		return nil, err
	}
	x.Scale = scale.Mul(rlwe.NewScale(2 * r.bundle.Size))
	return x, nil
}

// nearPowerOfTwo returns the power of two within 2^-40 (relative) of s,
// if there is one.
func nearPowerOfTwo(s rlwe.Scale) (rlwe.Scale, bool) {
	mant := new(big.Float)
	exp := s.Value.MantExp(mant) // s = mant 2^exp, mant in [0.5, 1)
	for _, m := range []float64{0.5, 1} {
		dev := new(big.Float).Sub(mant, big.NewFloat(m))
		if f, _ := dev.Float64(); math.Abs(f) <= m*math.Ldexp(1, -40) {
			return rlwe.NewScale(math.Ldexp(m, exp)), true
		}
	}
	return s, false
}

// finishBundle is the bundles' finish: the split doubles x (a bundle
// bootstrapped alone drops the imaginary part it does not use), the
// comparator gives the match value, and its complement replaces the
// bundle.
func (r *Reducer) finishBundle(z *rlwe.Ciphertext, paired bool) (a, b *rlwe.Ciphertext, err error) {
	re, im, err := fold.Split(r.eval, z)
	if err != nil {
		return nil, nil, err
	}
	if a, err = r.compareBundle(re); err != nil || !paired {
		return a, nil, err
	}
	b, err = r.compareBundle(im)
	return a, b, err
}

// compareBundle returns 1 - c(x2), c the bundler's comparator at 0, x2 the
// doubled bundle input.
func (r *Reducer) compareBundle(x2 *rlwe.Ciphertext) (*rlwe.Ciphertext, error) {
	pe := polynomial.NewEvaluator(r.params, r.eval)
	v, err := r.bundle.cmp.Evaluate(pe, x2, r.params.DefaultScale())
	if err != nil {
		return nil, fmt.Errorf("threshold test of a bundle: %w", err)
	}
	return r.complement(v)
}
