package payload

import (
	"fmt"
	"math"
	"sort"
	"sync"

	"encmatch/core/base/parallel"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// ResultScale is the scale at which the comparator outputs its match bits
// for a payload search, and so the scale of the result: 2^36 leaves cells
// 2^23 of headroom below the 60-bit base prime (a cell sums at most
// maxCellRecords bytes of 255, 2^21), while the match bits keep an error
// far below the comparator's own 2^-21.
const ResultScale = 1 << 36

// PayloadScale is the scale of the enrolled payload columns and of the
// public count and position columns. The product with the match bits and
// the folds run at the bits' level; the plaintext masks that place the
// cells are then encoded at q/PayloadScale (2^22 for a 45-bit prime q), so
// that the rescale by q leaves ResultScale. The choice balances two
// errors of a matching record's byte: a public-key encryption's noise,
// about 2^16.9/PayloadScale = 2^-6 (standard deviation, N = 2^15), and the
// masks' rounding, 2^-16 of the other columns of its cell (about 2^-7),
// against the decoder's byteTolerance of 1/4.
const PayloadScale = 1 << 23

// Group is one group's share of a payload search.
type Group struct {
	Index int // position of the group in the index: its g in the layout
	Start int // gallery position of slot 0
	Count int // records the group holds, in slots [0, Count)
	// Bits are the comparator's outputs, one per slot, at ResultScale.
	Bits *rlwe.Ciphertext
	// Columns are the group's 2W payload columns (PayloadColumns),
	// encrypted at Bits' level or above, at PayloadScale.
	Columns []*rlwe.Ciphertext
}

// Compactor is the server's side of a payload search.
type Compactor struct {
	Layout Layout
	p      ckks.Parameters
	keys   rlwe.EvaluationKeySet
}

// NewCompactor returns a compactor for layout l; keys must hold the
// relinearisation key and the keys of every rotation by a power of two
// below the slot count (as every key set does for the membership inner
// sum).
func NewCompactor(p ckks.Parameters, keys rlwe.EvaluationKeySet, l Layout) *Compactor {
	return &Compactor{Layout: l, p: p, keys: keys}
}

// Compact multiplies every group's match bits into its columns and sums
// them into the result's cells (Layout.Ciphertexts ciphertexts, one level
// below the bits). Groups may be any subset of the index (a shard): the
// results of disjoint subsets add up to the result of their union.
func (c *Compactor) Compact(groups []Group) ([]*rlwe.Ciphertext, error) {
	l := c.Layout
	if len(groups) == 0 {
		return nil, fmt.Errorf("payload search of no group")
	}
	groups = append([]Group(nil), groups...)
	sort.Slice(groups, func(i, j int) bool { return groups[i].Index < groups[j].Index })
	level := groups[0].Bits.Level()
	if level < 1 {
		return nil, fmt.Errorf("payload search: the match bits are at level 0, no level is left for the payload product (keys without the payload level?)")
	}
	for _, g := range groups {
		if g.Index < 0 || g.Index >= l.Groups || g.Count < 1 || g.Count > l.Slots || g.Bits.Level() != level || len(g.Columns) != 2*l.Width {
			return nil, fmt.Errorf("internal error: payload group %d (count %d, level %d, %d columns) does not fit the layout", g.Index, g.Count, g.Bits.Level(), len(g.Columns))
		}
		for _, col := range g.Columns {
			if col.Level() < level {
				return nil, fmt.Errorf("internal error: a payload column of group %d is at level %d, below the match bits' %d", g.Index, col.Level(), level)
			}
		}
	}
	out := make([]*rlwe.Ciphertext, l.Ciphertexts())
	for i := range out {
		out[i] = ckks.NewCiphertext(c.p, 1, level-1)
		out[i].Scale = groups[0].Bits.Scale
	}
	masks, err := c.placeMasks(level)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	// One evaluator per worker (evaluators hold buffers), reused across columns.
	evals := make(chan *ckks.Evaluator, parallel.Workers())
	for range parallel.Workers() {
		evals <- ckks.NewEvaluator(c.p, c.keys)
	}
	err = parallel.For(l.Columns(), func(col int) error {
		eval := <-evals
		defer func() { evals <- eval }()
		parts, err := c.column(eval, groups, masks, col, level)
		if err != nil {
			return fmt.Errorf("payload column %d: %w", col, err)
		}
		mu.Lock()
		defer mu.Unlock()
		for side, part := range parts {
			ct, _ := l.Where(side, col, 0)
			if err := eval.Add(out[ct], part, out[ct]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// masks are the plaintexts that place a column's cells, the same for every
// query at a level: block[k] keeps slots [k*m, (k+1)*m) (copy 1, column
// k mod w), stride keeps slots j*w (copy 2). They are encoded at
// q/PayloadScale, q the level's prime, so that the rescale after them
// leaves the bits' scale.
type masks struct {
	block  []*rlwe.Plaintext
	stride *rlwe.Plaintext
}

// placeMasks encodes the masks once per search, for the columns present.
func (c *Compactor) placeMasks(level int) (*masks, error) {
	l := c.Layout
	w := l.Block()
	enc := ckks.NewEncoder(c.p)
	scale := rlwe.NewScale(c.p.Q()[level]).Div(rlwe.NewScale(PayloadScale))
	encode := func(keep func(slot int) bool) (*rlwe.Plaintext, error) {
		v := make([]float64, l.Slots)
		for s := range v {
			if keep(s) {
				v[s] = 1
			}
		}
		pt := ckks.NewPlaintext(c.p, level)
		pt.Scale = scale
		return pt, enc.Encode(v, pt)
	}
	out := &masks{block: make([]*rlwe.Plaintext, min(w, l.Columns()))}
	var err error
	for k := range out.block {
		if out.block[k], err = encode(func(s int) bool { return s/l.Cells == k }); err != nil {
			return nil, err
		}
	}
	if out.stride, err = encode(func(s int) bool { return s%w == 0 }); err != nil {
		return nil, err
	}
	return out, nil
}

// column returns column col's contribution to the result ciphertext of
// each copy that holds it: the column of every group times its bits,
// summed into cells (at the bits' level), masked and rescaled (one level
// down, at the bits' scale) and moved to its place.
func (c *Compactor) column(eval *ckks.Evaluator, groups []Group, m *masks, col, level int) ([2]*rlwe.Ciphertext, error) {
	l := c.Layout
	var parts [2]*rlwe.Ciphertext
	ys := make([]*rlwe.Ciphertext, len(groups))
	for i, g := range groups {
		y, err := c.product(eval, g, col, level)
		if err != nil {
			return parts, err
		}
		ys[i] = y
	}
	// Copy 1: the groups added as they are.
	s1 := ys[0].CopyNew()
	for _, y := range ys[1:] {
		if err := eval.Add(s1, y, s1); err != nil {
			return parts, err
		}
	}
	// Copy 2: group g rotated by g*w, by Horner's rule from the last group.
	w := l.Block()
	s2 := ys[len(ys)-1].CopyNew()
	for i := len(ys) - 2; i >= 0; i-- {
		if err := c.rotate(eval, s2, (groups[i+1].Index-groups[i].Index)*w); err != nil {
			return parts, err
		}
		if err := eval.Add(s2, ys[i], s2); err != nil {
			return parts, err
		}
	}
	if err := c.rotate(eval, s2, groups[0].Index*w); err != nil {
		return parts, err
	}
	// Fold: copy 1 sums slots congruent modulo m, copy 2 sums blocks of w.
	for r := l.Slots / 2; r >= l.Cells; r /= 2 {
		if err := c.rotateAdd(eval, s1, r); err != nil {
			return parts, err
		}
	}
	for r := 1; r < w; r *= 2 {
		if err := c.rotateAdd(eval, s2, r); err != nil {
			return parts, err
		}
	}
	// Place: copy 1's cells in block k = col mod w, copy 2's cells (at
	// slots j*w) masked and moved to j*w - k.
	k := col % w
	var err error
	for i, x := range []struct {
		ct   *rlwe.Ciphertext
		mask *rlwe.Plaintext
	}{{s1, m.block[k]}, {s2, m.stride}} {
		if parts[i], err = eval.MulNew(x.ct, x.mask); err != nil {
			return parts, err
		}
		if err = eval.Rescale(parts[i], parts[i]); err != nil {
			return parts, err
		}
	}
	return parts, c.rotate(eval, parts[1], k)
}

// product is column col of group g times its match bits, at the bits'
// level and their scale times PayloadScale.
func (c *Compactor) product(eval *ckks.Evaluator, g Group, col, level int) (*rlwe.Ciphertext, error) {
	if col >= headerColumns {
		x := g.Columns[col-headerColumns]
		if x.Level() > level {
			x = x.CopyNew()
			eval.DropLevel(x, x.Level()-level)
		}
		if x.Scale.Cmp(rlwe.NewScale(PayloadScale)) != 0 {
			return nil, fmt.Errorf("payload column of group %d has scale 2^%.2f, not 2^%.0f", g.Index, x.Scale.Log2(), math.Log2(PayloadScale))
		}
		y := ckks.NewCiphertext(c.p, 1, level)
		if err := eval.MulRelin(g.Bits, x, y); err != nil {
			return nil, err
		}
		return y, nil
	}
	// The count and position columns are public: plaintexts.
	v := make([]float64, c.Layout.Slots)
	for s := 0; s < g.Count; s++ {
		if col == 0 {
			v[s] = 1
		} else {
			v[s] = float64((g.Start + s) >> (8 * (col - 1)) & 0xff)
		}
	}
	return c.mulPlain(eval, g.Bits, v, rlwe.NewScale(PayloadScale))
}

// mulPlain multiplies ct by the plaintext vector v encoded at scale.
func (c *Compactor) mulPlain(eval *ckks.Evaluator, ct *rlwe.Ciphertext, v []float64, scale rlwe.Scale) (*rlwe.Ciphertext, error) {
	pt := ckks.NewPlaintext(c.p, ct.Level())
	pt.Scale = scale
	if err := eval.Encoder.Encode(v, pt); err != nil {
		return nil, err
	}
	return eval.MulNew(ct, pt)
}

// rotate rotates ct in place left by k slots, as rotations by powers of two.
func (c *Compactor) rotate(eval *ckks.Evaluator, ct *rlwe.Ciphertext, k int) error {
	for _, r := range powersOfTwo(((k % c.Layout.Slots) + c.Layout.Slots) % c.Layout.Slots) {
		if err := eval.Rotate(ct, r, ct); err != nil {
			return err
		}
	}
	return nil
}

// rotateAdd adds to ct its rotation by r.
func (c *Compactor) rotateAdd(eval *ckks.Evaluator, ct *rlwe.Ciphertext, r int) error {
	rot, err := eval.RotateNew(ct, r)
	if err != nil {
		return err
	}
	return eval.Add(ct, rot, ct)
}
