package circuit

import (
	"runtime"
	"testing"

	"encmatch/core/base/params"

	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// TestRunEqualsLattigo: the program run on one, two and three workers gives
// Lattigo's polynomial evaluation of the comparator residue for residue,
// with its metadata, at depths from kappa 7 to the default 13, on inputs
// the program was not recorded on; a second run (reusing the first's
// buffers) too.
func TestRunEqualsLattigo(t *testing.T) {
	for _, kappa := range []int{7, 13} {
		f := newFixture(t, params.Toy, kappa, 64)
		prog := f.record(t)
		runners := []*Runner{f.runner(t, prog, 1), f.runner(t, prog, 2), f.runner(t, prog, 3)}
		for trial := range 2 {
			in := f.input()
			want := f.lattigo(t, in)
			for _, rn := range runners {
				got, err := rn.Run(in)
				if err != nil {
					t.Fatal(err)
				}
				if got.Level() != want.Level() || !equalValues(got, want) || got.Scale.Cmp(want.Scale) != 0 || !got.IsNTT {
					t.Fatalf("kappa %d, trial %d, %d workers: the run differs from Lattigo's evaluation", kappa, trial, rn.Workers())
				}
			}
		}
	}
}

// TestTryRunDoesNotWait: TryRun runs a free runner and declines a busy one.
func TestTryRunDoesNotWait(t *testing.T) {
	f := newFixture(t, params.Toy, 7, 64)
	rn := f.runner(t, f.record(t), runtime.GOMAXPROCS(0))
	in := f.input()
	if _, ran, err := rn.TryRun(in); !ran || err != nil {
		t.Fatalf("a free runner: ran %v, %v", ran, err)
	}
	rn.mu.Lock()
	_, ran, err := rn.TryRun(in)
	rn.mu.Unlock()
	if ran || err != nil {
		t.Fatalf("a busy runner: ran %v, %v", ran, err)
	}
	if rn.Bytes() == 0 {
		t.Fatal("no buffers kept after a run")
	}
}

// TestRunRefusesBadInput: no evaluator, or an input of the wrong form.
func TestRunRefusesBadInput(t *testing.T) {
	f := newFixture(t, params.Toy, 7, 64)
	prog := f.record(t)
	if _, err := NewRunner(f.p, prog, nil); err == nil {
		t.Fatal("a runner without evaluators")
	}
	rn := f.runner(t, prog, 2)
	if _, err := rn.Run(ckks.NewCiphertext(f.p, 2, f.level)); err == nil {
		t.Fatal("a degree-2 input")
	}
	if _, err := rn.Run(ckks.NewCiphertext(f.p, 1, 0)); err == nil {
		t.Fatal("an input below the recorded level")
	}
	if _, err := rn.Run(f.input()); err != nil {
		t.Fatalf("a good input after refused ones: %v", err)
	}
}
