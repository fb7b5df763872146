// Package strategy names the similarity strategies of the server, the
// rotations (and so the rotation keys) each needs, and the cost and memory
// model that chooses one automatically (papers/000, sections 3.4, 4.1-4.2
// and 5.3).
//
// With i = j*n1 + b (0 <= b < n1, 0 <= j < n2 = ceil(l/n1)),
//
//		sum_i Rot_i(q) * d_i = sum_j Rot_{j*n1}( sum_b Rot_b(q) * Rot_{-j*n1}(d_i) ).
//
//	  - dg (HyDia): all l-1 rotations of the query, hoisted; keys {1..l-1}.
//	  - bsgs-diagonal (papers/000 Alg. 1): the same table of l rotations built
//	    from n1-1 hoisted baby steps and, per baby step, hoisted giant steps
//	    (double hoisting); keys {1..n1-1} and {n1, 2n1, ...}.
//	  - bsgs-tbs: the server rotates every diagonal by -j*n1 once when it loads
//	    the index; per query only the n1 baby steps are kept, and each group
//	    costs n2 relinearisations and n2-1 giant rotations; keys as
//	    bsgs-diagonal plus {-n1, -2n1, ...}.
//	  - bsgs-tbe: as bsgs-tbs, but the enroller pre-rotates the diagonals in
//	    plaintext before encrypting them, so no negative keys exist.
package strategy

import (
	"fmt"

	"encmatch/core/base/errs"
)

// Strategy names.
const (
	DG           = "dg"
	BSGSDiagonal = "bsgs-diagonal"
	BSGSTBS      = "bsgs-tbs"
	BSGSTBE      = "bsgs-tbe"
	Auto         = "auto"
)

// Names lists the strategies.
var Names = []string{DG, BSGSDiagonal, BSGSTBS, BSGSTBE}

// Strategy is a strategy with its baby-step size for block size L.
type Strategy struct {
	Name string `json:"strategy"`
	N1   int    `json:"n1"`
	L    int    `json:"-"`
}

// New checks a strategy name and baby-step size for block size l. dg has
// n1 = l; n1 = 0 picks the default, the power of two nearest sqrt(l).
func New(name string, n1, l int) (Strategy, error) {
	if l < 1 || l&(l-1) != 0 {
		return Strategy{}, fmt.Errorf("%w: block size %d is not a power of two", errs.ErrInvalid, l)
	}
	switch name {
	case DG:
		return Strategy{Name: DG, N1: l, L: l}, nil
	case BSGSDiagonal, BSGSTBS, BSGSTBE:
	default:
		return Strategy{}, fmt.Errorf("%w: unknown strategy %q (want one of %v or %q)", errs.ErrInvalid, name, Names, Auto)
	}
	if n1 == 0 {
		n1 = DefaultN1(l)
	}
	if n1 < 1 || n1 > l {
		return Strategy{}, fmt.Errorf("%w: baby-step size n1=%d outside [1, %d]", errs.ErrInvalid, n1, l)
	}
	return Strategy{Name: name, N1: n1, L: l}, nil
}

// DefaultN1 is the power of two nearest sqrt(l) (rounded up).
func DefaultN1(l int) int {
	n1 := 1
	for n1*n1 < l {
		n1 <<= 1
	}
	return n1
}

// N2 is the number of giant steps, ceil(l / n1).
func (s Strategy) N2() int { return (s.L + s.N1 - 1) / s.N1 }

// PreRotatedByEnroller reports whether the index stores diagonals
// pre-rotated by -j*n1 (bsgs-tbe).
func (s Strategy) PreRotatedByEnroller() bool { return s.Name == BSGSTBE }

// PreRotatedByServer reports whether the server rotates the diagonals by
// -j*n1 when it loads the index (bsgs-tbs).
func (s Strategy) PreRotatedByServer() bool { return s.Name == BSGSTBS }

// FullTable reports whether the query's table holds all l rotations (dg,
// bsgs-diagonal) rather than only the n1 baby steps (tbs, tbe).
func (s Strategy) FullTable() bool { return s.Name == DG || s.Name == BSGSDiagonal }

// TableSize is the number of rotations of the query the server keeps: l
// for the full-table strategies, n1 for tbs and tbe.
func (s Strategy) TableSize() int {
	if s.FullTable() {
		return s.L
	}
	return s.N1
}

// ChunkSize is the unit of work and of streaming: one giant step (n1
// diagonals) for tbs and tbe, 32 diagonals for the full-table strategies.
func (s Strategy) ChunkSize() int {
	if s.FullTable() {
		return min(32, s.L)
	}
	return s.N1
}

// Babies are the baby-step rotations 1..n1-1.
func (s Strategy) Babies() []int {
	out := make([]int, 0, s.N1-1)
	for b := 1; b < s.N1 && b < s.L; b++ {
		out = append(out, b)
	}
	return out
}

// Giants are the giant-step rotations n1, 2n1, ..., (n2-1)n1.
func (s Strategy) Giants() []int {
	var out []int
	for j := 1; j < s.N2(); j++ {
		out = append(out, j*s.N1)
	}
	return out
}

// Rotations lists the slot rotations whose keys the strategy needs (the
// membership inner sum adds its own).
func (s Strategy) Rotations() []int {
	out := append(s.Babies(), s.Giants()...)
	if s.PreRotatedByServer() {
		for _, g := range s.Giants() {
			out = append(out, -g)
		}
	}
	return out
}

// PreRotation is the rotation applied to diagonal i by the enroller (tbe) or
// the server at load (tbs): -j*n1 with j = i / n1.
func (s Strategy) PreRotation(i int) int { return -(i / s.N1) * s.N1 }

func (s Strategy) String() string {
	if s.Name == DG {
		return DG
	}
	return fmt.Sprintf("%s (n1=%d, n2=%d)", s.Name, s.N1, s.N2())
}
