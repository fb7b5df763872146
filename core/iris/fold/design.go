package fold

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"

	"encmatch/core/base/errs"
)

// Design is a fold design as python's encmatch.iris.folding writes it
// (FoldDesign.to_dict, `encmatch iris fold -o`; a report holding it under
// "design" is read too): the polynomials in the Chebyshev basis on
// Domain, their measured bounds, and the classifiers' thresholds,
// tolerances and sum ranges. Tolerance is the sure classifier's (the
// design's sure_tolerance with a second polynomial), MaybeTolerance the
// maybe classifier's (absent with one polynomial: Tolerance).
type Design struct {
	T          float64     `json:"t"`
	Delta      float64     `json:"delta"`
	K          int         `json:"k"`
	Domain     [2]float64  `json:"domain"`
	Chebyshev  []float64   `json:"chebyshev"`
	Floor      float64     `json:"floor"`
	Top        float64     `json:"top"`
	SureAt     float64     `json:"sure_at"`
	Tolerance  float64     `json:"tolerance"`
	SumRange   [2]float64  `json:"sum_range"`
	MaybeAt    float64     `json:"maybe_at"`
	MaybeCheby []float64   `json:"maybe_chebyshev"`
	MaybeFloor *float64    `json:"maybe_floor"`
	MaybeTop   *float64    `json:"maybe_top"`
	MaybeTol   *float64    `json:"maybe_tolerance"`
	MaybeRange *[2]float64 `json:"maybe_range"`
}

// ReadDesign decodes and checks a design: every number finite, at least
// two coefficients per polynomial, the thresholds inside their sum
// ranges, positive tolerances, and the second polynomial's fields all
// present or all absent.
func ReadDesign(data []byte) (*Design, error) {
	var wrapped struct {
		Design *Design `json:"design"`
	}
	d := new(Design)
	if err := json.Unmarshal(data, &wrapped); err == nil && wrapped.Design != nil {
		d = wrapped.Design
	} else if err := json.NewDecoder(bytes.NewReader(data)).Decode(d); err != nil {
		return nil, fmt.Errorf("%w: a fold design: %v", errs.ErrInvalid, err)
	}
	if err := d.check(); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *Design) check() error {
	bad := func(what string, args ...any) error {
		return fmt.Errorf("%w: fold design: "+what, append([]any{errs.ErrInvalid}, args...)...)
	}
	finite := []float64{d.T, d.Delta, d.Domain[0], d.Domain[1], d.Floor, d.Top, d.SureAt, d.Tolerance, d.SumRange[0], d.SumRange[1], d.MaybeAt}
	finite = append(append(finite, d.Chebyshev...), d.MaybeCheby...)
	for _, p := range []*float64{d.MaybeFloor, d.MaybeTop, d.MaybeTol} {
		if p != nil {
			finite = append(finite, *p)
		}
	}
	if d.MaybeRange != nil {
		finite = append(finite, d.MaybeRange[0], d.MaybeRange[1])
	}
	for _, v := range finite {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return bad("a number that is not finite")
		}
	}
	if d.K < 1 || len(d.Chebyshev) < 2 || !(d.Domain[0] < d.Domain[1]) {
		return bad("k %d, %d coefficients on [%v, %v]", d.K, len(d.Chebyshev), d.Domain[0], d.Domain[1])
	}
	two := d.MaybeCheby != nil
	if all := d.MaybeFloor != nil && d.MaybeTop != nil && d.MaybeTol != nil && d.MaybeRange != nil; two != all || (two && len(d.MaybeCheby) < 2) {
		return bad("the second polynomial's coefficients, bounds, tolerance and range must come together")
	}
	if !(d.Tolerance > 0) || (two && !(*d.MaybeTol > 0)) {
		return bad("tolerances must be positive")
	}
	if !(d.SumRange[0] < d.SureAt && d.SureAt < d.SumRange[1]) {
		return bad("sure threshold %v outside its sums' range %v", d.SureAt, d.SumRange)
	}
	if r := d.maybeRange(); !(r[0] < d.MaybeAt && d.MaybeAt < r[1]) {
		return bad("maybe threshold %v outside its sums' range %v", d.MaybeAt, r)
	}
	return nil
}

// maybeRange is the range of the sums the maybe classifier reads.
func (d *Design) maybeRange() [2]float64 {
	if d.MaybeRange != nil {
		return *d.MaybeRange
	}
	return d.SumRange
}

// MaybeRangeAndTolerance are the maybe classifier's sum range and
// tolerance: h's, or f's with one polynomial.
func (d *Design) MaybeRangeAndTolerance() ([2]float64, float64) {
	if d.MaybeTol != nil {
		return d.maybeRange(), *d.MaybeTol
	}
	return d.SumRange, d.Tolerance
}

// Literal is the design's fold (the scales and special primes left to
// set): f, and h when the design has it, each with the bound max(|floor|,
// top) on its magnitude.
func (d *Design) Literal() Literal {
	lit := Literal{Delta: d.Delta, Top: math.Max(-d.Floor, d.Top),
		Poly: Polynomial{Lo: d.Domain[0], Hi: d.Domain[1], Chebyshev: d.Chebyshev}}
	if d.MaybeCheby != nil {
		lit.Maybe = &Polynomial{Lo: d.Domain[0], Hi: d.Domain[1], Chebyshev: d.MaybeCheby}
		lit.MaybeTop = math.Max(-*d.MaybeFloor, *d.MaybeTop)
	}
	return lit
}
