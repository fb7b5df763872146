package irismatch

import (
	"testing"

	"encmatch/core/iris/dftbatch"
	"encmatch/core/kernels"

	"github.com/tuneinsight/lattigo/v6/circuits/ckks/bootstrapping"
	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// BenchmarkClassify is one classification of the 128-bit iris presets: the
// kappa-12 comparator on one ciphertext of the bootstrapping ring (2^16,
// the 36-bit levels after a bootstrap, 61-bit key-switching primes), on
// one core, under every kernel set this CPU runs, side by side. The
// iris pipelines run it 62 times for 4 eyes of 31 rotations (Algorithm 1)
// and twice per refresh (Algorithm 2).
func BenchmarkClassify(b *testing.B) {
	const kappa = 12
	params := irisSecure(b).Bootstrap.BootstrappingParameters
	kg := rlwe.NewKeyGenerator(params)
	sk := kg.GenSecretKeyNew()
	cls, err := NewClassifier(params, rlwe.NewMemEvaluationKeySet(kg.GenRelinearizationKeyNew(sk)), kappa)
	if err != nil {
		b.Fatal(err)
	}
	pt := ckks.NewPlaintext(params, kappa)
	values := make([]float64, params.MaxSlots())
	for i := range values {
		values[i] = float64(i%200)/100 - 1
	}
	if err := ckks.NewEncoder(params).Encode(values, pt); err != nil {
		b.Fatal(err)
	}
	ct, err := rlwe.NewEncryptor(params, sk).EncryptNew(pt)
	if err != nil {
		b.Fatal(err)
	}
	eachSet(b, func(b *testing.B) {
		for b.Loop() {
			if _, err := cls.Classify(ct); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// eachSet runs f as a sub-benchmark per kernel set this CPU runs, so that
// one run compares them side by side.
func eachSet(b *testing.B, f func(b *testing.B)) {
	for _, s := range kernels.Available() {
		b.Run(string(s), func(b *testing.B) {
			prev := kernels.Active()
			if err := kernels.Use(s); err != nil {
				b.Fatal(err)
			}
			defer func() { _ = kernels.Use(prev) }()
			f(b)
		})
	}
}

// BenchmarkBootstrap is one refresh of the iris presets' pipelines:
// dftbatch.Bootstrap of two level-0 ciphertexts of the bootstrapping ring
// (2^16; the fold and pair passes refresh their columns two by two), on
// the workers of parallel.For, under every kernel set this CPU runs, side
// by side.
func BenchmarkBootstrap(b *testing.B) {
	btp := irisSecure(b).Bootstrap
	evk, sk, err := btp.GenEvaluationKeys(rlwe.NewKeyGenerator(btp.ResidualParameters).GenSecretKeyNew())
	if err != nil {
		b.Fatal(err)
	}
	eval, err := bootstrapping.NewEvaluator(btp, evk)
	if err != nil {
		b.Fatal(err)
	}
	params := btp.BootstrappingParameters
	values := make([]float64, params.MaxSlots())
	for i := range values {
		values[i] = float64(i%200)/400 - 0.25
	}
	cts := make([]*rlwe.Ciphertext, 2)
	for i := range cts {
		pt := ckks.NewPlaintext(params, 0)
		if err := ckks.NewEncoder(params).Encode(values, pt); err != nil {
			b.Fatal(err)
		}
		if cts[i], err = rlwe.NewEncryptor(params, sk).EncryptNew(pt); err != nil {
			b.Fatal(err)
		}
	}
	// The first bootstrap of a process also fills Lattigo's buffers and
	// grows the heap (about as long again as a bootstrap): it runs before
	// the timed sets.
	if _, err := dftbatch.Bootstrap(eval, cts); err != nil {
		b.Fatal(err)
	}
	eachSet(b, func(b *testing.B) {
		for b.Loop() {
			if _, err := dftbatch.Bootstrap(eval, cts); err != nil {
				b.Fatal(err)
			}
		}
	})
}
