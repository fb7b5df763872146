package engine

import (
	"sync"

	"encmatch/core/base/circuit"
	"encmatch/core/base/comparator"
	"encmatch/core/base/parallel"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// programKey names a recorded comparator: the scores' level and scale, and
// the output's scale (a payload search asks for another).
type programKey struct {
	level   int
	in, out float64
}

// programs are the comparator's recorded programs (package circuit), run
// on every core. Lattigo's polynomial evaluator is sequential: a search's
// last comparator (or its only one, for an index of one group) would keep
// one core busy while the others wait. A program is recorded in the
// background after the first search that needed it, from Lattigo's own
// evaluator on a random input, and used from then on; until then, and
// when its runner is busy with another group's comparator, the search
// uses Lattigo's evaluator. Both give the same ciphertext, residue for
// residue, so a search's result never depends on which ran.
type programs struct {
	mu    sync.Mutex
	byKey map[programKey]*program
	// recording counts the recordings running in the background.
	recording sync.WaitGroup
	// closed: the server was closed; nothing more is recorded.
	closed bool
}

// program is one comparator's program: wanted by a search, being
// recorded, recorded (runner) or failed (err: not retried; searches use
// Lattigo's evaluator).
type program struct {
	in        rlwe.Scale // the scores' scale
	recording bool
	runner    *circuit.Runner
	err       error
}

// compare runs the comparator on one group's scores, with output scale
// scale; it returns the number of cores the comparator ran on.
func (s *Server) compare(cmp *comparator.Comparator, scores *rlwe.Ciphertext, scale rlwe.Scale) (*rlwe.Ciphertext, int, error) {
	key := programKey{level: scores.Level(), in: scores.Scale.Float64(), out: scale.Float64()}
	var rn *circuit.Runner
	if parallel.Workers() > 1 && !s.sequentialComparator {
		s.programs.mu.Lock()
		if s.programs.byKey == nil {
			s.programs.byKey = map[programKey]*program{}
		}
		if pr := s.programs.byKey[key]; pr != nil {
			rn = pr.runner
		} else {
			s.programs.byKey[key] = &program{in: scores.Scale}
		}
		s.programs.mu.Unlock()
	}
	if rn != nil {
		out, ran, err := rn.TryRun(scores)
		if ran {
			return out, rn.Workers(), err
		}
	}
	out, err := cmp.Evaluate(s.poly, scores, scale)
	return out, 1, err
}

// recordPending starts recording, in the background, every program a
// search wanted that is not recorded, being recorded or failed.
func (s *Server) recordPending(cmp *comparator.Comparator) {
	s.programs.mu.Lock()
	defer s.programs.mu.Unlock()
	if s.programs.closed {
		return
	}
	for key, pr := range s.programs.byKey {
		if pr.runner != nil || pr.recording || pr.err != nil {
			continue
		}
		pr.recording = true
		s.programs.recording.Add(1)
		go func() {
			defer s.programs.recording.Done()
			rn, err := s.record(cmp, key, pr.in)
			s.programs.mu.Lock()
			defer s.programs.mu.Unlock()
			pr.recording, pr.runner, pr.err = false, rn, err
		}()
	}
}

// record records the comparator's program for key and gives it a runner
// with one Lattigo evaluator per core.
func (s *Server) record(cmp *comparator.Comparator, key programKey, in rlwe.Scale) (*circuit.Runner, error) {
	p := s.Params.CKKS
	prog, err := circuit.Record(p, s.keys.Keys, cmp, key.level, in, rlwe.NewScale(key.out))
	if err != nil {
		return nil, err
	}
	evals := make([]*ckks.Evaluator, parallel.Workers())
	for i := range evals {
		evals[i] = ckks.NewEvaluator(p, s.keys.Keys)
	}
	return circuit.NewRunner(p, prog, evals)
}

// WaitComparators waits for the comparator programs being recorded in the
// background (after earlier searches) and reports how many are ready:
// from then on every search runs its comparators on every core. For
// benchmarks, which time searches in a steady state.
func (s *Server) WaitComparators() int {
	s.programs.recording.Wait()
	s.programs.mu.Lock()
	defer s.programs.mu.Unlock()
	n := 0
	for _, pr := range s.programs.byKey {
		if pr.runner != nil {
			n++
		}
	}
	return n
}

// Close waits for the comparator programs being recorded in the background
// and drops every program, so that what they hold can be given back to the
// system: a service deleting an index gets its memory back. Nothing is
// recorded afterwards; a search still running ends with Lattigo's
// evaluator.
func (s *Server) Close() {
	s.programs.mu.Lock()
	s.programs.closed = true
	s.programs.mu.Unlock()
	s.programs.recording.Wait()
	s.programs.mu.Lock()
	defer s.programs.mu.Unlock()
	s.programs.byKey = nil
}
