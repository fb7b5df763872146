package engine

import (
	"testing"

	"encmatch/core/base/comparator"
	"encmatch/core/base/params"

	"github.com/tuneinsight/lattigo/v6/circuits/ckks/polynomial"
	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring/ringqp"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// BenchmarkOperations measures, on one core, the per-operation costs that
// the strategy model (strategy.DefaultCosts) is built from, at the default
// parameters:
//
//	go test -run '^$' -bench Operations -cpu 1 ./engine/
func BenchmarkOperations(b *testing.B) {
	set, err := params.New(params.Default, params.DefaultKappa, 512)
	if err != nil {
		b.Fatal(err)
	}
	p := set.CKKS
	kgen := rlwe.NewKeyGenerator(p)
	sk := kgen.GenSecretKeyNew()
	rots := []int{1, 2, 3, 4}
	gks := kgen.GenGaloisKeysNew(append(p.GaloisElements(rots), rlwe.GaloisElementsForInnerSum(p, 1, p.MaxSlots())...), sk)
	eval := ckks.NewEvaluator(p, rlwe.NewMemEvaluationKeySet(kgen.GenRelinearizationKeyNew(sk), gks...))
	enc := rlwe.NewEncryptor(p, sk)
	ct, _ := enc.EncryptNew(ckks.NewPlaintext(p, p.MaxLevel()))
	ct2, _ := enc.EncryptNew(ckks.NewPlaintext(p, p.MaxLevel()))
	out := ckks.NewCiphertext(p, 1, p.MaxLevel())
	level, levelP := p.MaxLevel(), p.MaxLevelP()
	decomp := make([]ringqp.Poly, p.BaseRNSDecompositionVectorSize(level, levelP))
	for i := range decomp {
		decomp[i] = ringqp.NewPoly(p.N(), level, levelP)
	}
	b.Run("decompose", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			eval.DecomposeNTT(level, levelP, levelP+1, ct.Value[1], ct.IsNTT, decomp)
		}
	})
	b.Run("hoisted-rotate", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := eval.AutomorphismHoisted(level, ct, decomp, p.GaloisElement(1+i%4), out); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("rotate", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := eval.Rotate(ct, 1+i%4, out); err != nil {
				b.Fatal(err)
			}
		}
	})
	acc := ckks.NewCiphertext(p, 2, level)
	b.Run("mul-add", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			acc.Scale = ct.Scale.Mul(ct2.Scale)
			if err := eval.MulThenAdd(ct, ct2, acc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("relinearize", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := eval.Relinearize(acc, out); err != nil {
				b.Fatal(err)
			}
		}
	})
	cmp, err := comparator.New(set.Kappa, 0.5, comparator.DefaultScoreScale)
	if err != nil {
		b.Fatal(err)
	}
	low := ckks.NewCiphertext(p, 1, set.Kappa)
	b.Run("comparator", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := cmp.Evaluate(polynomial.NewEvaluator(p, eval), low, p.DefaultScale()); err != nil {
				b.Fatal(err)
			}
		}
	})
	last := ckks.NewCiphertext(p, 1, 0)
	b.Run("inner-sum", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := eval.InnerSum(last, 1, p.MaxSlots(), last); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.ReportMetric(float64(ct.BinarySize()), "ct-bytes")
	b.ReportMetric(float64(gks[0].BinarySize()), "key-bytes")
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
	enc := rlwe.NewEncryptor(p, rlwe.NewKeyGenerator(p).GenSecretKeyNew())
	const n = 32
	qs, ds := make([]*rlwe.Ciphertext, n), make([]*rlwe.Ciphertext, n)
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
