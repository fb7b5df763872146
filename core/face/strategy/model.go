package strategy

import (
	"fmt"
	"math"
	"sort"

	"encmatch/core/base/errs"
	"encmatch/core/kernels"
)

// Costs are measured per-operation costs in seconds of one core while
// every core of the machine is busy (as a search's workers keep them), at
// the top level of the default parameters (N = 2^15, kappa = 13), and
// sizes in bytes. MeasuredCosts holds them for each vector kernel set;
// refresh them with the benchmarks named there.
type Costs struct {
	Decompose     float64 // hoisting decomposition of one ciphertext
	HoistedRotate float64 // one rotation given the decomposition
	Rotate        float64 // one rotation from scratch
	Relinearize   float64
	GiantStep     float64 // a tbs/tbe giant step: relinearise and rotate modulo QP, one ModDown (engine.giantSum)
	MulAdd        float64 // ciphertext x ciphertext product into a degree-2 accumulator, within a chunk of 32
	Comparator    float64 // comparator on one group (kappa = 13), Lattigo's sequential evaluator on one core
	// ComparatorSerial is the fraction of Comparator that does not spread
	// over cores when a group's comparator runs its recorded program on
	// all of them (circuit.Runner): on w cores it takes Comparator x
	// (ComparatorSerial + (1 - ComparatorSerial) / w).
	ComparatorSerial float64
	// Overlap is the fraction of a group's products, giant steps and
	// comparator (their core time spread over the workers) that each group
	// after the first adds to a search on two or more workers, where a
	// group's comparator overlaps the next group's products and the cores
	// share less than when they run the same operation.
	Overlap  float64
	InnerSum float64 // membership aggregation
	// RealPart is a folded layout's z + conj(z) per group (one rotation
	// and one more key; Folded sets it), 0 for the plain layout.
	RealPart float64

	DiskBytesPerSecond float64 // sequential read bandwidth for streamed groups
	// StreamDecode is the core time to read from the page cache, check
	// and decode one streamed diagonal stored whole; StreamDecodeHalf the
	// same for a seeded store's stored half, and StreamMask the time to
	// regenerate its uniform half.
	StreamDecode, StreamDecodeHalf, StreamMask float64
	// SeededStore: the index is the key owner's seeded store (Seeded sets
	// it): half the bytes on disk, the uniform halves regenerated.
	SeededStore bool
	// StoredBytes is one diagonal's record on disk (its stored half in a
	// seeded store); 0 counts CiphertextBytes (half of it when seeded).
	StoredBytes int64

	CiphertextBytes int64 // a degree-1 ciphertext at the top level
	KeyBytes        int64 // one rotation key
	Slots           int   // slots per ciphertext (the inner sum rotates by its powers of two)
}

// MeasuredCosts are the costs with each vector kernel set (docs/KERNELS.md),
// measured on one 2-vCPU AMD EPYC (Zen 4: AVX2, AVX-512 VNNI and IFMA) on
// 2026-11-29 with ENCMATCH_KERNELS set to the kernel set, N = 2^15, kappa
// = 13 (log QP 840), Lattigo v6.2.0 with the kernels patch
// (bench-results/cost-model-2core, which also sets them beside measured
// searches):
//
//   - the operations: medians of three runs of `go test -run '^$' -bench
//     Operations -cpu 2 -benchtime 10x -count 3 ./face/engine/`
//     (core-s/op; MulAdd is chunk-products over its 32 products);
//   - ComparatorSerial, fitted to `go test -run '^$' -bench
//     'Comparator/run-2' -benchtime 3x -count 2 ./base/circuit/` (one
//     comparator on both cores) against Comparator;
//   - Overlap, fitted to BenchmarkSearch in memory at K = 2^16 (four
//     groups, bsgs-tbe n1 32, folded) against the rest of the model.
//
// The avx2 and scalar sets were forced on that host, whose scalar
// multiplications are faster than an AVX2-only host's.
var MeasuredCosts = map[kernels.Set]Costs{
	kernels.AVX512IFMA: withSizes(Costs{
		Decompose: 0.0213, HoistedRotate: 0.0261, Rotate: 0.0438, Relinearize: 0.0462,
		GiantStep: 0.0846, MulAdd: 0.0629 / 32, Comparator: 0.9372, ComparatorSerial: 0.028, Overlap: 0.69, InnerSum: 0.0492,
	}),
	kernels.AVX2: withSizes(Costs{
		Decompose: 0.0449, HoistedRotate: 0.0406, Rotate: 0.0823, Relinearize: 0.0880,
		GiantStep: 0.1233, MulAdd: 0.0587 / 32, Comparator: 1.456, ComparatorSerial: 0.038, Overlap: 0.85, InnerSum: 0.1146,
	}),
	kernels.Scalar: withSizes(Costs{
		Decompose: 0.0631, HoistedRotate: 0.0444, Rotate: 0.1143, Relinearize: 0.1042,
		GiantStep: 0.1574, MulAdd: 0.1121 / 32, Comparator: 1.794, ComparatorSerial: 0.136, Overlap: 0.81, InnerSum: 0.1197,
	}),
}

// withSizes sets the sizes the measurements were taken at, the disk
// bandwidth assumed for streaming and the streaming costs, which do not
// depend on the kernel set: StreamDecode and StreamDecodeHalf are the
// medians over the three sets of `go test -run '^$' -bench StreamGroups
// -benchtime 2x ./face/index/` on a public-key and a seeded index of 2^17
// entries; StreamMask is what the seeded store added per diagonal in
// streamed searches (seeded against public-key, K = 2^16 and 2^17, two
// kernel sets, core time; mean 0.81 ms over the whole diagonal's 3.31),
// less the stored half's decoding. (The same benchmark's regeneration
// alone, 3.19 ms, overstates it in a search.)
func withSizes(c Costs) Costs {
	c.DiskBytesPerSecond = 1.5e9 // dd with O_DIRECT on the development machine
	c.StreamDecode, c.StreamDecodeHalf, c.StreamMask = 0.00331, 0.00204, 0.00208
	c.CiphertextBytes, c.KeyBytes, c.Slots = 7_864_862, 47_187_632, 1<<14
	return c
}

// DefaultCosts are the measured costs of the kernel set in use
// (kernels.Active()).
func DefaultCosts() Costs {
	return CostsFor(kernels.Active())
}

// CostsFor are the measured costs of kernel set k, the scalar set's for a
// set without measurements.
func CostsFor(k kernels.Set) Costs {
	if c, ok := MeasuredCosts[k]; ok {
		return c
	}
	return MeasuredCosts[kernels.Scalar]
}

// For adapts costs measured at the default parameters to another parameter
// set, from its ciphertext and key sizes and slot count: times scale with
// the ciphertext size (ring degree times primes), to first order.
func (c Costs) For(ciphertextBytes, keyBytes int64, slots int) Costs {
	r := float64(ciphertextBytes) / float64(c.CiphertextBytes)
	out := c
	for _, t := range []*float64{&out.Decompose, &out.HoistedRotate, &out.Rotate, &out.Relinearize, &out.GiantStep, &out.MulAdd,
		&out.Comparator, &out.InnerSum, &out.StreamDecode, &out.StreamDecodeHalf, &out.StreamMask} {
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

// Seeded adapts costs to the key owner's seeded store: a streamed diagonal
// is half the bytes, and its uniform half is regenerated.
func (c Costs) Seeded() Costs {
	c.SeededStore = true
	return c
}

// streamed returns the bytes a streamed diagonal reads and the core time
// to check, decode and complete it.
func (c Costs) streamed() (bytes, seconds float64) {
	bytes, seconds = float64(c.CiphertextBytes), c.StreamDecode
	if c.SeededStore {
		bytes, seconds = bytes/2, c.StreamDecodeHalf+c.StreamMask
	}
	if c.StoredBytes > 0 {
		bytes = float64(c.StoredBytes)
	}
	return bytes, seconds
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
	var perQuery, perGroup float64
	products := float64(l) * c.MulAdd
	switch {
	case s.Name == DG:
		perQuery = c.Decompose + float64(l-1)*c.HoistedRotate
		perGroup = products + c.Relinearize
	case s.Name == BSGSDiagonal:
		perQuery = float64(n1)*c.Decompose + float64(l-1)*c.HoistedRotate
		perGroup = products + c.Relinearize
	default: // tbs, tbe
		perQuery = c.Decompose + float64(n1-1)*c.HoistedRotate
		// Giant step 0 is not rotated: a relinearisation.
		perGroup = products + c.Relinearize + float64(n2-1)*c.GiantStep
		if s.PreRotatedByServer() {
			e.LoadSeconds = float64(groups*(l-n1)) * c.Rotate / w
		}
	}
	perGroup += c.RealPart
	groupBytes := int64(l) * c.CiphertextBytes
	e.MemoryBytes = overhead(e.KeyBytes + int64(s.TableSize()+2*workers)*c.CiphertextBytes + int64(groups)*groupBytes)
	if budget > 0 && e.MemoryBytes > budget && !s.PreRotatedByServer() {
		e.Streamed = true
		e.MemoryBytes = s.StreamingMemory(e.KeyBytes, c.CiphertextBytes, workers)
	}
	// Rotations of the query parallelise over workers, and so do a
	// group's products and giant steps; each group's comparator overlaps
	// the next group's products, so every group after the first adds
	// Overlap of its products and comparator spread over the workers. The
	// last comparator runs alone: on every core (its recorded program) in
	// memory, on one (Lattigo's sequential evaluator) when streamed.
	more := float64(groups-1) * (perGroup + c.Comparator) / w
	if workers > 1 {
		more *= c.Overlap
	}
	last := c.Comparator * (c.ComparatorSerial + (1-c.ComparatorSerial)/w)
	if e.Streamed {
		last = c.Comparator
	}
	e.QuerySeconds = perQuery/w + perGroup/w + more + last + c.InnerSum
	if e.Streamed {
		// The same cores check, decode and complete every diagonal;
		// reading from the disk overlaps the computation: the slower of
		// the two bounds it.
		bytes, seconds := c.streamed()
		diagonals := float64(groups * l)
		e.QuerySeconds += diagonals * seconds / w
		e.QuerySeconds = math.Max(e.QuerySeconds, diagonals*bytes/c.DiskBytesPerSecond)
	}
	return e
}

// StreamingMemory estimates the resident memory of a server that streams
// its groups with strategy s on workers cores: the keys (keyBytes), the
// query's table and two ciphertexts per worker, and the streaming window of
// 2 + 2 workers chunks (ChunkSize), with the Go runtime's headroom. A budget below
// it is overrun whatever the gallery's size.
func (s Strategy) StreamingMemory(keyBytes, ciphertextBytes int64, workers int) int64 {
	return overhead(keyBytes + int64(s.TableSize()+2*workers)*ciphertextBytes + int64((2+2*workers)*s.ChunkSize())*ciphertextBytes)
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
