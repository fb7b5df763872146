package circuit

import (
	"testing"

	"encmatch/core/base/params"

	"github.com/tuneinsight/lattigo/v6/circuits/ckks/polynomial"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// BenchmarkComparator times the comparator at the secure default preset
// (kappa 13) on one ciphertext of scores: Lattigo's sequential polynomial
// evaluator ("lattigo") against the recorded program run on 1 and 2
// workers (with the buffers each runner keeps), and how long recording the
// program takes.
//
//	go test -run '^$' -bench Comparator -benchtime 5x ./base/circuit/
func BenchmarkComparator(b *testing.B) {
	f := newFixture(b, params.Default, params.DefaultKappa, 512)
	prog := f.record(b)
	in := f.input()
	b.Run("record", func(b *testing.B) {
		for range b.N {
			f.record(b)
		}
	})
	b.Run("lattigo", func(b *testing.B) {
		pe := polynomial.NewEvaluator(f.p, ckks.NewEvaluator(f.p, f.evk))
		for range b.N {
			if _, err := f.cmp.Evaluate(pe, in.CopyNew(), f.p.DefaultScale()); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, workers := range []int{1, 2} {
		rn := f.runner(b, prog, workers)
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
