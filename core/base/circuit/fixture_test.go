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

// fixture is a comparator at a preset with a relinearisation key, and the
// level and scale of the scores it runs on (one level below the top, at
// the scale of a rescaled product of two fresh ciphertexts).
type fixture struct {
	p     ckks.Parameters
	evk   rlwe.EvaluationKeySet
	cmp   *comparator.Comparator
	level int
	scale rlwe.Scale
	uni   *ring.UniformSampler
}

func newFixture(tb testing.TB, preset string, kappa, dim int) *fixture {
	tb.Helper()
	set, err := params.New(preset, kappa, dim)
	if err != nil {
		tb.Fatal(err)
	}
	p := set.CKKS
	kgen := rlwe.NewKeyGenerator(p)
	evk := rlwe.NewMemEvaluationKeySet(kgen.GenRelinearizationKeyNew(kgen.GenSecretKeyNew()))
	cmp, err := comparator.New(kappa, 0.4, comparator.DefaultScoreScale)
	if err != nil {
		tb.Fatal(err)
	}
	level := p.MaxLevel() - 1
	src, err := sampling.NewPRNG()
	if err != nil {
		tb.Fatal(err)
	}
	return &fixture{p: p, evk: evk, cmp: cmp, level: level,
		scale: p.DefaultScale().Mul(p.DefaultScale()).Div(rlwe.NewScale(p.Q()[p.MaxLevel()])),
		uni:   ring.NewUniformSampler(src, p.RingQ().AtLevel(level))}
}

// record records the comparator's program at the fixture's level and scale.
func (f *fixture) record(tb testing.TB) *Program {
	tb.Helper()
	prog, err := Record(f.p, f.evk, f.cmp, f.level, f.scale, f.p.DefaultScale())
	if err != nil {
		tb.Fatal(err)
	}
	return prog
}

// input is a uniformly random ciphertext at the fixture's level and scale.
func (f *fixture) input() *rlwe.Ciphertext {
	in := ckks.NewCiphertext(f.p, 1, f.level)
	in.Scale = f.scale
	for _, poly := range in.Value {
		f.uni.Read(poly)
	}
	return in
}

// lattigo is Lattigo's polynomial evaluation of the comparator on in.
func (f *fixture) lattigo(tb testing.TB, in *rlwe.Ciphertext) *rlwe.Ciphertext {
	tb.Helper()
	out, err := f.cmp.Evaluate(polynomial.NewEvaluator(f.p, ckks.NewEvaluator(f.p, f.evk)), in.CopyNew(), f.p.DefaultScale())
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// runner is a runner of prog with workers evaluators.
func (f *fixture) runner(tb testing.TB, prog *Program, workers int) *Runner {
	tb.Helper()
	evals := make([]*ckks.Evaluator, workers)
	for i := range evals {
		evals[i] = ckks.NewEvaluator(f.p, f.evk)
	}
	rn, err := NewRunner(f.p, prog, evals)
	if err != nil {
		tb.Fatal(err)
	}
	return rn
}
