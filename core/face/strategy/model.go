package strategy

import (
	"fmt"
	"math"
	"sort"

	"encmatch/core/base/errs"
)

// Costs are measured per-operation costs in seconds on one core, at the top
// level of the default parameters (N = 2^15, kappa = 13), and sizes in
// bytes. DefaultCosts were measured on the project's 2-core machine with
// BenchmarkOperations in package engine; refresh them there.
type Costs struct {
	Decompose     float64 // hoisting decomposition of one ciphertext
	HoistedRotate float64 // one rotation given the decomposition
	Rotate        float64 // one rotation from scratch
	Relinearize   float64
	GiantStep     float64 // a tbs/tbe giant step: relinearise and rotate modulo QP, one ModDown (engine.giantSum)
	MulAdd        float64 // ciphertext x ciphertext product into a degree-2 accumulator, within a chunk of 32
	Comparator    float64 // comparator on one group (kappa = 13)
	InnerSum      float64 // membership aggregation
	// RealPart is a folded layout's z + conj(z) per group (one rotation
	// and one more key; Folded sets it), 0 for the plain layout.
	RealPart float64

	DiskBytesPerSecond float64 // sequential read bandwidth for streamed groups

	CiphertextBytes int64 // a degree-1 ciphertext at the top level
	KeyBytes        int64 // one rotation key
	Slots           int   // slots per ciphertext (the inner sum rotates by its powers of two)
}

// DefaultCosts: medians of three runs of `go test -run '^$' -bench
// 'Operations|ChunkProducts|GiantStep' -cpu 1 -benchtime 5x -count 3
// ./engine/` on the 2-core AMD EPYC development machine (no AVX-512),
// N = 2^15, kappa = 13 (log QP 840), Lattigo v6.2.0. MulAdd is
// ChunkProducts/tiled-lazy divided by its 32 products; GiantStep is
// GiantStep/lazy.
var DefaultCosts = Costs{
	Decompose: 0.0670, HoistedRotate: 0.0476, Rotate: 0.1189, Relinearize: 0.1067,
	GiantStep: 0.2459, MulAdd: 0.1151 / 32, Comparator: 2.168, InnerSum: 0.1269,
	DiskBytesPerSecond: 1.5e9, // dd with O_DIRECT on the same machine
	CiphertextBytes:    7_864_862, KeyBytes: 47_187_632, Slots: 1 << 14,
}

// For adapts costs measured at the default parameters to another parameter
// set, from its ciphertext and key sizes and slot count: times scale with
// the ciphertext size (ring degree times primes), to first order.
func (c Costs) For(ciphertextBytes, keyBytes int64, slots int) Costs {
	r := float64(ciphertextBytes) / float64(c.CiphertextBytes)
	out := c
	for _, t := range []*float64{&out.Decompose, &out.HoistedRotate, &out.Rotate, &out.Relinearize, &out.GiantStep, &out.MulAdd, &out.Comparator, &out.InnerSum} {
		*t *= r
	}
	out.CiphertextBytes, out.KeyBytes, out.Slots = ciphertextBytes, keyBytes, slots
	return out
}

// Folded adapts costs to a folded layout (params.Set.Fold): the strategy's
// block is already half the padded dimension; each group adds the real
// part, one rotation with the conjugation key.
func (c Costs) Folded() Costs {
	c.RealPart = c.Rotate
	return c
}

// KeyCount is the number of distinct rotation keys: the strategy's and
// those of the membership inner sum over all slots (rotations by 1, 2, 4,
// ..., slots/2).
func (s Strategy) KeyCount(slots int) int {
	seen := map[int]bool{}
	for _, r := range s.Rotations() {
		seen[((r%slots)+slots)%slots] = true
	}
	for r := 1; r < slots; r <<= 1 {
		seen[r] = true
	}
	return len(seen)
}

// RuntimeOverhead is the factor between live data and a Go process's
// resident memory at GOGC=25 (the library's setting): the collector lets
// the heap grow 25 % past the live data. Memory estimates include it.
const RuntimeOverhead = 1.25

// Estimate is the model's prediction for one strategy.
type Estimate struct {
	Strategy
	Keys         int     `json:"keys"`
	KeyBytes     int64   `json:"key_bytes"`
	QuerySeconds float64 `json:"query_seconds"` // membership, on `workers` cores
	LoadSeconds  float64 `json:"load_seconds"`  // server-side pre-rotation at load
	MemoryBytes  int64   `json:"memory_bytes"`  // keys + query table + groups resident
	Streamed     bool    `json:"streamed"`      // groups streamed from disk
}

// Estimate predicts the membership time and server memory of s for a
// gallery of groups groups on workers cores with a memory budget (bytes;
// 0 = unlimited). Groups are held in memory when they fit in the budget
// next to the keys and the query table, else streamed from disk in chunks
// (one giant step, or 32 diagonals), with at most 2 + 2*workers chunks
// resident. bsgs-tbs cannot stream (its diagonals are rotated at load).
func (s Strategy) Estimate(groups, workers int, budget int64, c Costs) Estimate {
	l, n1, n2 := s.L, s.N1, s.N2()
	w := float64(max(workers, 1))
	keys := s.KeyCount(c.Slots)
	if c.RealPart > 0 {
		keys++ // the conjugation
	}
	e := Estimate{Strategy: s, Keys: keys, KeyBytes: int64(keys) * c.KeyBytes}
	var table int
	var perQuery, perGroup float64
	products := float64(l) * c.MulAdd
	switch {
	case s.Name == DG:
		table = l
		perQuery = c.Decompose + float64(l-1)*c.HoistedRotate
		perGroup = products + c.Relinearize
	case s.Name == BSGSDiagonal:
		table = l
		perQuery = float64(n1)*c.Decompose + float64(l-1)*c.HoistedRotate
		perGroup = products + c.Relinearize
	default: // tbs, tbe
		table = n1
		perQuery = c.Decompose + float64(n1-1)*c.HoistedRotate
		// Giant step 0 is not rotated: a relinearisation.
		perGroup = products + c.Relinearize + float64(n2-1)*c.GiantStep
		if s.PreRotatedByServer() {
			e.LoadSeconds = float64(groups*(l-n1)) * c.Rotate / w
		}
	}
	perGroup += c.RealPart
	groupBytes := int64(l) * c.CiphertextBytes
	fixed := e.KeyBytes + int64(table+2*workers)*c.CiphertextBytes
	resident := int64(groups) * groupBytes
	if budget > 0 && overhead(fixed+resident) > budget && !s.PreRotatedByServer() {
		e.Streamed = true
		chunk := int64(n1)
		if s.FullTable() {
			chunk = int64(min(32, l))
		}
		resident = int64(2+2*workers) * chunk * c.CiphertextBytes
	}
	e.MemoryBytes = overhead(fixed + resident)
	// Rotations of the query parallelise over workers; per group, the
	// products and giant steps do, the comparator runs on one core per
	// group with groups spread over workers.
	cmp := float64(groups) * c.Comparator / math.Min(w, float64(groups))
	e.QuerySeconds = perQuery/w + float64(groups)*perGroup/w + cmp + c.InnerSum
	if e.Streamed {
		// Reading overlaps the computation: the slower of the two bounds it.
		e.QuerySeconds = math.Max(e.QuerySeconds, float64(int64(groups)*groupBytes)/c.DiskBytesPerSecond)
	}
	return e
}

// Choose picks the fastest strategy and n1 (powers of two) whose predicted
// memory fits the budget (0 = unlimited); among near-equal times (within
// 5 %) it prefers fewer keys. It returns all candidates, best first.
func Choose(l, groups, workers int, budget int64, c Costs) (Estimate, []Estimate, error) {
	var all []Estimate
	for _, name := range Names {
		n1s := []int{l}
		if name != DG {
			n1s = nil
			for n1 := 2; n1 < l; n1 <<= 1 {
				n1s = append(n1s, n1)
			}
		}
		for _, n1 := range n1s {
			s, err := New(name, n1, l)
			if err != nil {
				return Estimate{}, nil, err
			}
			all = append(all, s.Estimate(groups, workers, budget, c))
		}
	}
	sort.SliceStable(all, func(i, j int) bool {
		a, b := all[i], all[j]
		fa, fb := budget == 0 || a.MemoryBytes <= budget, budget == 0 || b.MemoryBytes <= budget
		if fa != fb {
			return fa
		}
		if math.Abs(a.QuerySeconds-b.QuerySeconds) > 0.05*math.Min(a.QuerySeconds, b.QuerySeconds) {
			return a.QuerySeconds < b.QuerySeconds
		}
		return a.Keys < b.Keys
	})
	if len(all) == 0 || (budget > 0 && all[0].MemoryBytes > budget) {
		return Estimate{}, all, fmt.Errorf("%w: no strategy fits a memory budget of %.1f GB for block size %d", errs.ErrInvalid, float64(budget)/1e9, l)
	}
	return all[0], all, nil
}

func overhead(live int64) int64 { return int64(float64(live) * RuntimeOverhead) }
