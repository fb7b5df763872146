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

// BenchmarkComparator times the comparator at the secure default preset
// (kappa 13) on one ciphertext of scores: Lattigo's sequential polynomial
// evaluator ("lattigo") against the recorded program run on 1 and 2
// workers, and how long recording the program takes.
//
//	go test -run '^$' -bench Comparator -benchtime 5x ./base/circuit/
func BenchmarkComparator(b *testing.B) {
	set, err := params.New(params.Default, params.DefaultKappa, 512)
	if err != nil {
		b.Fatal(err)
	}
	p := set.CKKS
	kgen := rlwe.NewKeyGenerator(p)
	evk := rlwe.NewMemEvaluationKeySet(kgen.GenRelinearizationKeyNew(kgen.GenSecretKeyNew()))
	cmp, err := comparator.New(set.Kappa, 0.5, comparator.DefaultScoreScale)
	if err != nil {
		b.Fatal(err)
	}
	level := p.MaxLevel() - 1
	scale := p.DefaultScale().Mul(p.DefaultScale()).Div(rlwe.NewScale(p.Q()[p.MaxLevel()]))
	prog, err := Record(p, evk, cmp, level, scale, p.DefaultScale())
	if err != nil {
		b.Fatal(err)
	}
	b.Run("record", func(b *testing.B) {
		for range b.N {
			if _, err := Record(p, evk, cmp, level, scale, p.DefaultScale()); err != nil {
				b.Fatal(err)
			}
		}
	})
	in := ckks.NewCiphertext(p, 1, level)
	in.Scale = scale
	src, _ := sampling.NewPRNG()
	uni := ring.NewUniformSampler(src, p.RingQ().AtLevel(level))
	for _, poly := range in.Value {
		uni.Read(poly)
	}
	b.Run("lattigo", func(b *testing.B) {
		pe := polynomial.NewEvaluator(p, ckks.NewEvaluator(p, evk))
		for range b.N {
			if _, err := cmp.Evaluate(pe, in.CopyNew(), p.DefaultScale()); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, workers := range []int{1, 2} {
		evals := make([]*ckks.Evaluator, workers)
		for i := range evals {
			evals[i] = ckks.NewEvaluator(p, evk)
		}
		rn, err := NewRunner(p, prog, evals)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(map[int]string{1: "run-1", 2: "run-2"}[workers], func(b *testing.B) {
			for range b.N {
				if _, err := rn.Run(in); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(rn.Bytes())/1e9, "GB-kept")
		})
	}
}
