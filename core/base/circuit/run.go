package circuit

import (
	"container/heap"
	"fmt"
	"sync"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// Runner runs a program on several workers, each with a Lattigo evaluator
// of its own, keeping the registers' buffers from one run to the next. One
// run at a time (Run waits for the runner, TryRun does not).
type Runner struct {
	prog  *Program
	p     ckks.Parameters
	evals []*ckks.Evaluator
	mu    sync.Mutex
	// free are buffers of registers no longer read, by degree and level.
	free map[[2]int][]*rlwe.Ciphertext
}

// NewRunner returns a runner of prog with one worker per evaluator in
// evals (distinct evaluators, ckks.NewEvaluator: Lattigo's evaluators keep
// buffers).
func NewRunner(p ckks.Parameters, prog *Program, evals []*ckks.Evaluator) (*Runner, error) {
	if len(evals) == 0 {
		return nil, fmt.Errorf("circuit: no evaluator to run the program")
	}
	return &Runner{prog: prog, p: p, evals: evals, free: map[[2]int][]*rlwe.Ciphertext{}}, nil
}

// Run evaluates the program on in with Lattigo's ring arithmetic and
// evaluators and returns its output (a new ciphertext) with the recorded
// metadata: the ciphertext Lattigo's polynomial evaluator gives on in,
// residue for residue. Steps start as soon as their inputs are ready, the
// one with the longest chain of work behind it first; a register's buffer
// is reused after its last reader.
func (rn *Runner) Run(in *rlwe.Ciphertext) (*rlwe.Ciphertext, error) {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	return rn.run(in)
}

// TryRun is Run when the runner is free; it returns false, without
// running, when another run holds it.
func (rn *Runner) TryRun(in *rlwe.Ciphertext) (*rlwe.Ciphertext, bool, error) {
	if !rn.mu.TryLock() {
		return nil, false, nil
	}
	defer rn.mu.Unlock()
	out, err := rn.run(in)
	return out, true, err
}

// Workers is the number of workers a run uses.
func (rn *Runner) Workers() int { return len(rn.evals) }

// Bytes is the size of the buffers the runner keeps between runs.
func (rn *Runner) Bytes() int64 {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	var n int64
	for _, list := range rn.free {
		for _, ct := range list {
			n += int64(ct.BinarySize())
		}
	}
	return n
}

// run is Run; the caller holds rn.mu.
func (rn *Runner) run(in *rlwe.Ciphertext) (*rlwe.Ciphertext, error) {
	if in.Degree() != 1 || !in.IsNTT {
		return nil, fmt.Errorf("circuit: the input must be a degree-1 ciphertext in the NTT domain")
	}
	prog, p := rn.prog, rn.p
	s := newSchedule(prog)
	regs := make([]*rlwe.Ciphertext, prog.Registers)
	regs[0] = in
	var (
		mu      sync.Mutex
		cond    = sync.NewCond(&mu)
		failed  error
		pending = len(prog.Ops)
	)
	for _, i := range s.initial() {
		heap.Push(&s.ready, i)
	}
	var wg sync.WaitGroup
	for _, eval := range rn.evals {
		wg.Add(1)
		go func(eval *ckks.Evaluator) {
			defer wg.Done()
			for {
				mu.Lock()
				for s.ready.Len() == 0 && pending > 0 && failed == nil {
					cond.Wait()
				}
				if pending == 0 || failed != nil {
					mu.Unlock()
					return
				}
				i := heap.Pop(&s.ready).(int)
				op := &prog.Ops[i]
				ins := make([]*rlwe.Ciphertext, len(op.In))
				for k, r := range op.In {
					ins[k] = regs[r]
				}
				out := rn.buffer(op.Degree, op.Level, op.Out == prog.Output)
				mu.Unlock()

				err := step(p, eval, op, ins, out)

				mu.Lock()
				if err != nil {
					if failed == nil {
						failed = fmt.Errorf("circuit: step %d (%s): %w", i, op.Kind, err)
					}
				} else {
					regs[op.Out] = out
					for _, r := range op.In {
						if s.readers[r]--; s.readers[r] == 0 && r != 0 && r != prog.Output {
							rn.release(regs[r])
							regs[r] = nil
						}
					}
					for _, j := range s.next[op.Out] {
						if s.waiting[j]--; s.waiting[j] == 0 {
							heap.Push(&s.ready, j)
						}
					}
					pending--
				}
				cond.Broadcast()
				mu.Unlock()
			}
		}(eval)
	}
	wg.Wait()
	if failed != nil {
		return nil, failed
	}
	out := regs[prog.Output]
	*out.MetaData = prog.meta
	return out, nil
}

// buffer returns a ciphertext of the given degree and level: a released
// one, or a new one for the output (which leaves with the caller). The
// caller holds the schedule's lock.
func (rn *Runner) buffer(degree, level int, output bool) *rlwe.Ciphertext {
	key := [2]int{degree, level}
	if list := rn.free[key]; len(list) > 0 && !output {
		ct := list[len(list)-1]
		rn.free[key] = list[:len(list)-1]
		return ct
	}
	return ckks.NewCiphertext(rn.p, degree, level)
}

// release keeps ct's buffer for a later step.
func (rn *Runner) release(ct *rlwe.Ciphertext) {
	key := [2]int{ct.Degree(), ct.Level()}
	rn.free[key] = append(rn.free[key], ct)
}

// step computes one step of the program with Lattigo into out.
func step(p ckks.Parameters, eval *ckks.Evaluator, op *Op, ins []*rlwe.Ciphertext, out *rlwe.Ciphertext) error {
	for _, in := range ins {
		if in.Level() < op.Level {
			return fmt.Errorf("an input at level %d below the output's %d", in.Level(), op.Level)
		}
	}
	*out.MetaData = *ins[0].MetaData // scales do not enter the arithmetic
	rq := p.RingQ().AtLevel(op.Level)
	switch op.Kind {
	case OpLinear:
		linear(rq, op, ins, out)
	case OpTensor:
		a, b := ins[0].Value, ins[1].Value
		rq.MulCoeffsBarrett(a[0], b[0], out.Value[0])
		rq.MulCoeffsBarrett(a[0], b[1], out.Value[1])
		rq.MulCoeffsBarrettThenAdd(a[1], b[0], out.Value[1])
		rq.MulCoeffsBarrett(a[1], b[1], out.Value[2])
	case OpMulRelin:
		// Lattigo's own product: the recorded step (its tensor equals
		// OpTensor's, then the relinearisation).
		return eval.MulRelin(ins[0], ins[1], out)
	case OpRelin:
		return eval.Relinearize(ins[0], out)
	case OpRescale:
		return eval.Rescale(ins[0], out)
	default:
		return fmt.Errorf("unknown step %q", op.Kind)
	}
	return nil
}

// linear computes out_c = sum_i a_i in_i,c (+ b on component 0), per prime
// and per half of the coefficients; a component an input lacks reads as 0.
func linear(rq *ring.Ring, op *Op, ins []*rlwe.Ciphertext, out *rlwe.Ciphertext) {
	half := rq.N() / 2
	for c := 0; c <= op.Degree; c++ {
		for j := 0; j <= op.Level; j++ {
			s := rq.SubRings[j]
			for h := range 2 {
				dst := out.Value[c].Coeffs[j][h*half : (h+1)*half]
				clear(dst)
				for i, in := range ins {
					if c > in.Degree() {
						continue
					}
					a := ring.MForm(op.Scalars[i][j][h], s.Modulus, s.BRedConstant)
					s.MulScalarMontgomeryThenAdd(in.Value[c].Coeffs[j][h*half:(h+1)*half], a, dst)
				}
				if c == 0 {
					s.AddScalar(dst, op.Constant[j][h], dst)
				}
			}
		}
	}
}

// schedule is the program's dependency graph: which steps read each
// register, how many inputs each step still waits for, and the steps
// ready to run, ordered by the work on their longest path to the output.
type schedule struct {
	next    [][]int // next[r]: the steps that read register r (once each)
	waiting []int   // waiting[i]: step i's inputs not yet computed
	readers []int   // readers[r]: steps that read register r and have not run
	ready   byPriority
}

func newSchedule(prog *Program) *schedule {
	n := len(prog.Ops)
	s := &schedule{next: make([][]int, prog.Registers), waiting: make([]int, n), readers: make([]int, prog.Registers)}
	writer := make([]int, prog.Registers)
	for r := range writer {
		writer[r] = -1
	}
	for i, op := range prog.Ops {
		writer[op.Out] = i
	}
	for i, op := range prog.Ops {
		seen := map[int]bool{}
		for _, r := range op.In {
			s.readers[r]++
			if seen[r] {
				continue
			}
			seen[r] = true
			s.next[r] = append(s.next[r], i)
			if writer[r] >= 0 {
				s.waiting[i]++
			}
		}
	}
	// Priority: the step's cost plus the costliest chain of steps after it.
	s.ready.rank = make([]float64, n)
	for i := n - 1; i >= 0; i-- {
		tail := 0.0
		for _, j := range s.next[prog.Ops[i].Out] {
			tail = max(tail, s.ready.rank[j])
		}
		s.ready.rank[i] = cost(&prog.Ops[i]) + tail
	}
	return s
}

// initial returns the steps that read only the input.
func (s *schedule) initial() []int {
	var out []int
	for i, w := range s.waiting {
		if w == 0 {
			out = append(out, i)
		}
	}
	return out
}

// cost is a step's relative work: key switches dominate, then rescales
// (two NTTs per row), then products and linear steps.
func cost(op *Op) float64 {
	rows := float64(op.Level + 1)
	switch op.Kind {
	case OpMulRelin, OpRelin:
		return 8 * rows
	case OpRescale:
		return 2 * rows * float64(op.Degree+1)
	case OpTensor:
		return rows
	}
	return 0.2 * rows * float64(op.Degree+1)
}

// byPriority is a max-heap of step indices by rank.
type byPriority struct {
	steps []int
	rank  []float64
}

func (h byPriority) Len() int           { return len(h.steps) }
func (h byPriority) Less(a, b int) bool { return h.rank[h.steps[a]] > h.rank[h.steps[b]] }
func (h byPriority) Swap(a, b int)      { h.steps[a], h.steps[b] = h.steps[b], h.steps[a] }
func (h *byPriority) Push(x any)        { h.steps = append(h.steps, x.(int)) }
func (h *byPriority) Pop() any {
	x := h.steps[len(h.steps)-1]
	h.steps = h.steps[:len(h.steps)-1]
	return x
}
