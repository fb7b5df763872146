package engine

import (
	"runtime"
	"testing"

	"encmatch/core/base/comparator"
	"encmatch/core/base/params"

	"github.com/tuneinsight/lattigo/v6/circuits/ckks/polynomial"
	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring/ringqp"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// BenchmarkOperations measures the per-operation costs that the strategy
// model (strategy.MeasuredCosts) is built from, at the default parameters,
// with every core busy: each of GOMAXPROCS goroutines repeats the
// operation on its own evaluator and buffers (b.RunParallel), as a
// search's workers do, so that the cores share the memory bandwidth as
// they do in a search. core-s/op is the wall time per operation times
// the goroutines: the seconds one operation occupies a core under that
// load, which the model divides among its workers.
//
//	go test -run '^$' -bench Operations -cpu 2 -benchtime 10x -count 3 ./face/engine/
//
// chunk-products is one giant step's 32 ciphertext products
// (accumulateProducts), giant-step one lazy giant step (giantSum.add), and
// comparator Lattigo's sequential evaluator, one per core.
func BenchmarkOperations(b *testing.B) {
	set, err := params.New(params.Default, params.DefaultKappa, 512)
	if err != nil {
		b.Fatal(err)
	}
	p := set.CKKS
	kgen := rlwe.NewKeyGenerator(p)
	sk := kgen.GenSecretKeyNew()
	const giantRotation = 32
	rots := []int{1, 2, 3, 4, giantRotation}
	gks := kgen.GenGaloisKeysNew(append(p.GaloisElements(rots), rlwe.GaloisElementsForInnerSum(p, 1, p.MaxSlots())...), sk)
	evk := rlwe.NewMemEvaluationKeySet(kgen.GenRelinearizationKeyNew(sk), gks...)
	enc := rlwe.NewEncryptor(p, sk)
	level, levelP := p.MaxLevel(), p.MaxLevelP()
	rq := p.RingQ().AtLevel(level)
	encrypt := func(level int) *rlwe.Ciphertext {
		ct, err := enc.EncryptNew(ckks.NewPlaintext(p, level))
		if err != nil {
			b.Fatal(err)
		}
		return ct
	}
	cmp, err := comparator.New(set.Kappa, 0.5, comparator.DefaultScoreScale)
	if err != nil {
		b.Fatal(err)
	}
	// Each operation: a constructor of one goroutine's state, returning
	// the operation to repeat.
	ops := []struct {
		name string
		make func(eval *ckks.Evaluator) func() error
	}{
		{"decompose", func(eval *ckks.Evaluator) func() error {
			ct, decomp := encrypt(level), newDecomposition(p, level, levelP)
			return func() error { eval.DecomposeNTT(level, levelP, levelP+1, ct.Value[1], ct.IsNTT, decomp); return nil }
		}},
		{"hoisted-rotate", func(eval *ckks.Evaluator) func() error {
			ct, decomp, out := encrypt(level), newDecomposition(p, level, levelP), ckks.NewCiphertext(p, 1, level)
			eval.DecomposeNTT(level, levelP, levelP+1, ct.Value[1], ct.IsNTT, decomp)
			i := 0
			return func() error { i++; return eval.AutomorphismHoisted(level, ct, decomp, p.GaloisElement(1+i%4), out) }
		}},
		{"rotate", func(eval *ckks.Evaluator) func() error {
			ct, out := encrypt(level), ckks.NewCiphertext(p, 1, level)
			i := 0
			return func() error { i++; return eval.Rotate(ct, 1+i%4, out) }
		}},
		{"relinearize", func(eval *ckks.Evaluator) func() error {
			ct := encrypt(level)
			acc, err := eval.MulNew(ct, ct)
			if err != nil {
				b.Fatal(err)
			}
			out := ckks.NewCiphertext(p, 1, level)
			return func() error { return eval.Relinearize(acc, out) }
		}},
		{"chunk-products", func(*ckks.Evaluator) func() error {
			qs, ds := chunkOperands(b, p, enc, level, 32)
			acc := ckks.NewCiphertext(p, 2, level)
			return func() error { accumulateProducts(rq, qs, ds, acc); return nil }
		}},
		{"giant-step", func(eval *ckks.Evaluator) func() error {
			ct := encrypt(level)
			acc, err := eval.MulNew(ct, ct)
			if err != nil {
				b.Fatal(err)
			}
			g, err := newGiantSum(p, eval, level)
			if err != nil {
				b.Fatal(err)
			}
			return func() error { return g.add(acc, giantRotation) }
		}},
		{"comparator", func(eval *ckks.Evaluator) func() error {
			low, pe := ckks.NewCiphertext(p, 1, set.Kappa), polynomial.NewEvaluator(p, eval)
			return func() error { _, err := cmp.Evaluate(pe, low, p.DefaultScale()); return err }
		}},
		{"inner-sum", func(eval *ckks.Evaluator) func() error {
			last := ckks.NewCiphertext(p, 1, 0)
			return func() error { return eval.InnerSum(last, 1, p.MaxSlots(), last) }
		}},
	}
	procs := runtime.GOMAXPROCS(0)
	for _, op := range ops {
		b.Run(op.name, func(b *testing.B) {
			// Every goroutine's state is made before the clock starts.
			states := make(chan func() error, procs)
			for range procs {
				states <- op.make(ckks.NewEvaluator(p, evk))
			}
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				run := <-states
				for pb.Next() {
					if err := run(); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(b.Elapsed().Seconds()*float64(procs)/float64(b.N), "core-s/op")
		})
	}
}

// newDecomposition allocates a hoisting decomposition of one ciphertext at
// level, levelP.
func newDecomposition(p ckks.Parameters, level, levelP int) []ringqp.Poly {
	decomp := make([]ringqp.Poly, p.BaseRNSDecompositionVectorSize(level, levelP))
	for i := range decomp {
		decomp[i] = ringqp.NewPoly(p.N(), level, levelP)
	}
	return decomp
}

// BenchmarkChunkProducts compares, on one core at the default parameters,
// a giant step's 32 ciphertext products accumulated one product after the
// other with Lattigo's ring operations (the engine's kernel before
// accumulateProducts) and by accumulateProducts (tiled and lazy, or
// package kernels' accumulator where the active set has one:
// ENCMATCH_KERNELS):
//
//	go test -run '^$' -bench ChunkProducts -cpu 1 -count 5 ./engine/
func BenchmarkChunkProducts(b *testing.B) {
	set, err := params.New(params.Default, params.DefaultKappa, 512)
	if err != nil {
		b.Fatal(err)
	}
	p := set.CKKS
	level := p.MaxLevel()
	rq := p.RingQ().AtLevel(level)
	const n = 32
	qs, ds := chunkOperands(b, p, rlwe.NewEncryptor(p, rlwe.NewKeyGenerator(p).GenSecretKeyNew()), level, n)
	acc := ckks.NewCiphertext(p, 2, level)
	b.Run("per-product", func(b *testing.B) {
		for range b.N {
			for i := range n {
				rq.MulCoeffsMontgomeryThenAdd(qs[i].Value[0], ds[i].Value[0], acc.Value[0])
				rq.MulCoeffsMontgomeryThenAdd(qs[i].Value[0], ds[i].Value[1], acc.Value[1])
				rq.MulCoeffsMontgomeryThenAdd(qs[i].Value[1], ds[i].Value[0], acc.Value[1])
				rq.MulCoeffsMontgomeryThenAdd(qs[i].Value[1], ds[i].Value[1], acc.Value[2])
			}
		}
	})
	b.Run("tiled-lazy", func(b *testing.B) {
		for range b.N {
			accumulateProducts(rq, qs, ds, acc)
		}
	})
}

// chunkOperands encrypts a chunk of n query rotations, in Montgomery form
// as the engine keeps its query table, and n diagonals, at level.
func chunkOperands(b *testing.B, p ckks.Parameters, enc *rlwe.Encryptor, level, n int) (qs, ds []*rlwe.Ciphertext) {
	rq := p.RingQ().AtLevel(level)
	qs, ds = make([]*rlwe.Ciphertext, n), make([]*rlwe.Ciphertext, n)
	for i := range n {
		var err error
		if qs[i], err = enc.EncryptNew(ckks.NewPlaintext(p, level)); err != nil {
			b.Fatal(err)
		}
		for _, poly := range qs[i].Value {
			rq.MForm(poly, poly)
		}
		if ds[i], err = enc.EncryptNew(ckks.NewPlaintext(p, level)); err != nil {
			b.Fatal(err)
		}
	}
	return qs, ds
}

// BenchmarkGiantStep compares, on one core at the default parameters, one
// giant step of bsgs-tbe/tbs done the way the engine did it before
// giantSum (relinearise, rotate, add: four divisions by P) and by giantSum
// (one division by P for the relinearisation's second part; the sum's own
// division, once per group, is left out):
//
//	go test -run '^$' -bench GiantStep -cpu 1 -count 5 ./engine/
func BenchmarkGiantStep(b *testing.B) {
	set, err := params.New(params.Default, params.DefaultKappa, 512)
	if err != nil {
		b.Fatal(err)
	}
	p := set.CKKS
	kgen := rlwe.NewKeyGenerator(p)
	sk := kgen.GenSecretKeyNew()
	const rotation = 32
	eval := ckks.NewEvaluator(p, rlwe.NewMemEvaluationKeySet(kgen.GenRelinearizationKeyNew(sk),
		kgen.GenGaloisKeysNew(p.GaloisElements([]int{rotation}), sk)...))
	enc := rlwe.NewEncryptor(p, sk)
	level := p.MaxLevel()
	ct, err := enc.EncryptNew(ckks.NewPlaintext(p, level))
	if err != nil {
		b.Fatal(err)
	}
	acc, err := eval.MulNew(ct, ct)
	if err != nil {
		b.Fatal(err)
	}
	step, sum := ckks.NewCiphertext(p, 1, level), ckks.NewCiphertext(p, 1, level)
	b.Run("relinearize-rotate", func(b *testing.B) {
		for range b.N {
			if err := eval.Relinearize(acc, step); err != nil {
				b.Fatal(err)
			}
			if err := eval.Rotate(step, rotation, step); err != nil {
				b.Fatal(err)
			}
			if err := eval.Add(sum, step, sum); err != nil {
				b.Fatal(err)
			}
		}
	})
	g, err := newGiantSum(p, eval, level)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("lazy", func(b *testing.B) {
		for range b.N {
			if err := g.add(acc, rotation); err != nil {
				b.Fatal(err)
			}
		}
	})
}
