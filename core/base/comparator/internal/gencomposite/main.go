// Command gencomposite generates core/base/comparator/composites_gen.go: for each
// depth budget kappa, a chain of minimax sign polynomials (Lee et al., built
// stage after stage with Lattigo's multi-interval Remez algorithm, as
// circuits/ckks/minimax.GenMinimaxCompositePolynomial does) and the smallest
// gap, a multiple of 1/8192, for which the chain's error on
// [-1, -gap] U [gap, 1] is at most the comparator's sign tolerance.
//
// Stage 0 approximates sign on [-1, -gap] U [gap, 1]; it is shifted to
// vanish at 0 (a no-op up to round-off: the problem is symmetric) and
// scaled into [-1, 1]. Every later stage is the odd minimax approximation of
// sign on the previous stage's image, widened by the CKKS error bound.
//
// Run from core/: go run ./comparator/internal/gencomposite > comparator/composites_gen.go
// (about 20 minutes on one core; `... gencomposite 12 13` makes only those
// kappas' entries). Remez's progress goes to stderr.
package main

import (
	"fmt"
	"math"
	"math/big"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/tuneinsight/lattigo/v6/utils/bignum"
)

const (
	prec        = 128
	schemeError = 1.0 / (1 << 30) // CKKS error bound on a stage's input
	target      = 1.0 / (1 << 22) // comparator.signTolerance, in sign units
	gapUnit     = 1.0 / 8192      // resolution of the gap search
)

// degrees of each depth budget: sum of ceil(log2(degree+1)) is kappa. From
// kappa 9 on, a tail of degrees 15 and 7 (depth 7) takes stage 0's output,
// about 0.2 away from 0 at the gap's edge, to within 2^-22 of sign, and every
// further level goes to stage 0, halving the gap: that allocation gave the
// narrowest gaps of those tried (equal degrees, tails of degree 7).
var degrees = map[int][]int{
	7:  {15, 7},
	8:  {15, 15},
	9:  {3, 15, 7},
	10: {7, 15, 7},
	11: {15, 15, 7},
	12: {31, 15, 7},
	13: {63, 15, 7},
}

// searchRange brackets each kappa's gap, in units of 1/8192: earlier,
// wider searches (from [1, 2048]) found these, and a bracket of two or three
// units makes the run take minutes instead of an hour. Remez breaks down on
// a tail whose input is already within ~2^-12 of +-1, which wide gaps give
// a stage 0 of high degree: keep a wider search below 1/32 for kappa >= 12.
var searchRange = map[int][2]int{
	7: {1510, 1512}, 8: {680, 682}, 9: {607, 609},
	10: {268, 270}, 11: {125, 127}, 12: {61, 63}, 13: {30, 32},
}

// chain returns the stages' coefficients (Chebyshev basis, each read on
// [-1, 1]) and the final error, or ok=false if Remez fails.
func chain(gap float64, degs []int) (stages [][]string, finalErr float64, ok bool) {
	const rho = 1.0 // stage 0's interval is [-1, -gap] U [gap, rho]
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	// Stage 0: as many nodes on each interval as an odd Remez of its degree
	// takes (Lattigo's minimax generator does the same).
	half := 1 + (degs[0]+1)/2
	r := remez(bignum.Sign, -1, -gap, half, gap, rho, half)
	c0 := r.Coeffs
	p0 := bignum.NewPolynomial(bignum.Chebyshev, c0, [2]float64{-1, rho})
	shift := p0.Evaluate(new(big.Float).SetPrec(prec))[0]
	c0[0].Sub(c0[0], shift)
	p0 = bignum.NewPolynomial(bignum.Chebyshev, c0, [2]float64{-1, rho})
	e0, _ := r.MaxErr.Float64()
	sh, _ := shift.Float64()
	peak := 1 + e0 + math.Abs(sh)
	for u := -1.0; u <= rho; u += (1 + rho) / 8192 {
		y, _ := p0.Evaluate(big.NewFloat(u).SetPrec(prec))[0].Float64()
		peak = math.Max(peak, math.Abs(y))
	}
	lo, hi := (1-e0-math.Abs(sh))/peak, 1.0
	if !(lo > 0) {
		return nil, e0, false
	}
	prev, prevScale := c0, peak
	finalErr = 1 - lo
	for _, d := range degs[1:] {
		lo, hi = lo-schemeError, hi+schemeError
		half := 1 + (d+1)/2
		r := remez(bignum.Sign, -hi, -lo, half, lo, hi, half)
		stages = append(stages, format(prev, prevScale*hi, degs[len(stages)], len(stages) > 0))
		prev, prevScale = r.Coeffs, 1
		e, _ := r.MaxErr.Float64()
		if !(e < 1) {
			return nil, e, false
		}
		finalErr = e
		lo, hi = 1-e, 1+e
	}
	stages = append(stages, format(prev, prevScale, degs[len(stages)], len(stages) > 0))
	return stages, finalErr, true
}

func remez(f func(*big.Float) *big.Float, a0, b0 float64, n0 int, a1, b1 float64, n1 int) *bignum.Remez {
	r := bignum.NewRemez(bignum.RemezParameters{
		Function: f,
		Basis:    bignum.Chebyshev,
		Intervals: []bignum.Interval{
			{A: *bignum.NewFloat(a0, prec), B: *bignum.NewFloat(b0, prec), Nodes: n0},
			{A: *bignum.NewFloat(a1, prec), B: *bignum.NewFloat(b1, prec), Nodes: n1},
		},
		ScanStep: bignum.NewFloat(math.Min(1e-3, (b1-a1)/64), prec), Prec: prec, OptimalScanStep: true,
	})
	r.Approximate(60, 1e-6)
	return r
}

// format prints the coefficients up to degree deg divided by k; odd drops
// the even terms (Remez round-off of an odd function; the odd Remez of
// degree deg solves for deg + 2 coefficients, the last one even).
func format(c []*big.Float, k float64, deg int, odd bool) []string {
	out := make([]string, deg+1)
	for i, x := range c[:deg+1] {
		if odd && i%2 == 0 {
			out[i] = "0"
			continue
		}
		out[i] = new(big.Float).SetPrec(prec).Quo(x, big.NewFloat(k)).Text('g', 36)
	}
	return out
}

func main() {
	stdout := os.Stdout
	os.Stdout = os.Stderr // Remez prints its iterations
	var kappas []int
	for k := range degrees {
		kappas = append(kappas, k)
	}
	sort.Ints(kappas)
	if len(os.Args) > 1 { // only some depth budgets, for a partial run
		kappas = kappas[:0]
		for _, a := range os.Args[1:] {
			k, err := strconv.Atoi(a)
			if _, ok := degrees[k]; err != nil || !ok {
				fmt.Fprintf(os.Stderr, "no depth budget %q\n", a)
				os.Exit(2)
			}
			kappas = append(kappas, k)
		}
	}
	var b strings.Builder
	b.WriteString("// Code generated by go run ./comparator/internal/gencomposite; DO NOT EDIT.\n\npackage comparator\n\n")
	b.WriteString("// composites maps each depth budget kappa to its chain of minimax sign\n// polynomials (internal/gencomposite).\nvar composites = map[int]composite{\n")
	for _, k := range kappas {
		lo, hi := searchRange[k][0], searchRange[k][1]
		var best [][]string
		var bestErr float64
		for lo < hi {
			mid := (lo + hi) / 2
			st, e, ok := chain(float64(mid)*gapUnit, degrees[k])
			fmt.Fprintf(os.Stderr, "kappa %d gap %d/8192: ok=%v error 2^%.2f\n", k, mid, ok, math.Log2(e))
			if ok && e <= target {
				hi, best, bestErr = mid, st, e
			} else {
				lo = mid + 1
			}
		}
		if best == nil {
			best, bestErr, _ = chain(float64(hi)*gapUnit, degrees[k])
		}
		fmt.Fprintf(&b, "\t%d: {gap: %d.0 / 8192, signError: %.6g, stages: [][]string{\n", k, hi, bestErr)
		for _, st := range best {
			fmt.Fprintf(&b, "\t\t{\"%s\"},\n", strings.Join(st, "\", \""))
		}
		b.WriteString("\t}},\n")
	}
	b.WriteString("}\n")
	fmt.Fprint(stdout, b.String())
}
