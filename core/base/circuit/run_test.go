package circuit

import (
	"testing"

	"encmatch/core/base/comparator"
	"encmatch/core/base/params"

	"github.com/tuneinsight/lattigo/v6/circuits/ckks/polynomial"
	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
	"github.com/tuneinsight/lattigo/v6/utils/sampling"
)

// TestRunEqualsLattigo: the program run on one, two and three workers gives
// Lattigo's polynomial evaluation of the comparator residue for residue,
// with its metadata, at depths from kappa 7 to the default 13, on inputs
// the program was not recorded on; a second run (reusing the first's
// buffers) too.
func TestRunEqualsLattigo(t *testing.T) {
	for _, kappa := range []int{7, 13} {
		set, err := params.New(params.Toy, kappa, 64)
		if err != nil {
			t.Fatal(err)
		}
		p := set.CKKS
		kgen := rlwe.NewKeyGenerator(p)
		sk := kgen.GenSecretKeyNew()
		evk := rlwe.NewMemEvaluationKeySet(kgen.GenRelinearizationKeyNew(sk))
		eval := ckks.NewEvaluator(p, evk)
		cmp, err := comparator.New(kappa, 0.4, comparator.DefaultScoreScale)
		if err != nil {
			t.Fatal(err)
		}
		level := p.MaxLevel() - 1
		scale := p.DefaultScale().Mul(p.DefaultScale()).Div(rlwe.NewScale(p.Q()[p.MaxLevel()]))
		prog, err := Record(p, evk, cmp, level, scale, p.DefaultScale())
		if err != nil {
			t.Fatal(err)
		}
		src, _ := sampling.NewPRNG()
		uni := ring.NewUniformSampler(src, p.RingQ().AtLevel(level))
		runners := make([]*Runner, 3)
		for w := range runners {
			evals := make([]*ckks.Evaluator, w+1)
			for i := range evals {
				evals[i] = ckks.NewEvaluator(p, evk)
			}
			if runners[w], err = NewRunner(p, prog, evals); err != nil {
				t.Fatal(err)
			}
		}
		for trial := range 2 {
			in := ckks.NewCiphertext(p, 1, level)
			in.Scale = scale
			for _, poly := range in.Value {
				uni.Read(poly)
			}
			want, err := cmp.Evaluate(polynomial.NewEvaluator(p, eval), in.CopyNew(), p.DefaultScale())
			if err != nil {
				t.Fatal(err)
			}
			for w, rn := range runners {
				workers := w + 1
				got, err := rn.Run(in)
				if err != nil {
					t.Fatal(err)
				}
				if got.Level() != want.Level() || !equalValues(got, want) || got.Scale.Cmp(want.Scale) != 0 || !got.IsNTT {
					t.Fatalf("kappa %d, trial %d, %d workers: the run differs from Lattigo's evaluation", kappa, trial, workers)
				}
			}
		}
	}
}

// TestRunRefusesBadInput: no evaluator, or an input of the wrong form.
func TestRunRefusesBadInput(t *testing.T) {
	set, err := params.New(params.Toy, 7, 64)
	if err != nil {
		t.Fatal(err)
	}
	p := set.CKKS
	kgen := rlwe.NewKeyGenerator(p)
	evk := rlwe.NewMemEvaluationKeySet(kgen.GenRelinearizationKeyNew(kgen.GenSecretKeyNew()))
	cmp, err := comparator.New(7, 0.4, comparator.DefaultScoreScale)
	if err != nil {
		t.Fatal(err)
	}
	level := p.MaxLevel() - 1
	prog, err := Record(p, evk, cmp, level, p.DefaultScale(), p.DefaultScale())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewRunner(p, prog, nil); err == nil {
		t.Fatal("a runner without evaluators")
	}
	rn, err := NewRunner(p, prog, []*ckks.Evaluator{ckks.NewEvaluator(p, evk), ckks.NewEvaluator(p, evk)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rn.Run(ckks.NewCiphertext(p, 2, level)); err == nil {
		t.Fatal("a degree-2 input")
	}
	if _, err := rn.Run(ckks.NewCiphertext(p, 1, 0)); err == nil {
		t.Fatal("an input below the recorded level")
	}
	if _, err := rn.Run(ckks.NewCiphertext(p, 1, level)); err != nil {
		t.Fatalf("a good input after refused ones: %v", err)
	}
}
