package fold

import (
	"math/big"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"encmatch/core/iris/ccmm"
	"encmatch/core/iris/slotdb"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
)

// irisFoldCCMM is the modulus budget of docs/IRIS.md ("Levels for f") at
// the iris size: database ring 2^14, query ring 2^13, 16,384 positions, Q
// two 20-bit primes and the fold's levels of 30 bits (set per design by
// BenchmarkGroup), K of about the same sizes (a stand-in: K's size is not
// yet measured), Delta = 2^22, read as CKKS values (Approximate: encoded
// entries of 2^12 put the product's noise bound at 2^30.4, over Delta/2;
// slotdb.Encoder.NoiseBound puts it at 0.23 score units in a slot, the
// rounding at 0.20).
var irisFoldCCMM = ccmm.Literal{LogNDB: 14, LogNQ: 13, Inner: 1 << 14, LogScale: 22, Approximate: true, MaxAbsDB: 1 << 12}

// BenchmarkGroup measures Group at the iris size on a fold group of k
// columns (ENCMATCH_FOLD_BENCH_K, default 4) of random residues (the
// work does not depend on the values): per column one conjugation and two
// normalisations, then two evaluations of the degree-15 design ("f"), or
// of the two-polynomial design's f and h from one power basis ("f+h"),
// with the workers of parallel.For. Q has the levels each design needs.
// Reported: seconds per column.
func BenchmarkGroup(b *testing.B) {
	one := Literal{Poly: design, Top: designTop, Delta: designDelta}
	for _, c := range []struct {
		name string
		lit  Literal
	}{{"f", one}, {"f+h", twoDesign}} {
		b.Run(c.name, func(b *testing.B) { benchmarkGroup(b, c.lit) })
	}
}

func benchmarkGroup(b *testing.B, lit Literal) {
	k := 4
	if v, err := strconv.Atoi(os.Getenv("ENCMATCH_FOLD_BENCH_K")); err == nil && v > 0 {
		k = v
	}
	cl := irisFoldCCMM
	cl.LogQ, cl.LogK = []int{20, 20}, []int{21, 21}
	for range NormLevels + lit.Depth() {
		cl.LogQ, cl.LogK = append(cl.LogQ, 30), append(cl.LogK, 30)
	}
	cp, err := ccmm.NewParams(cl)
	if err != nil {
		b.Fatal(err)
	}
	enc, err := slotdb.NewEncoder(cl.LogNDB, 17)
	if err != nil {
		b.Fatal(err)
	}
	lit.LogP, lit.LogScale, lit.LogSumScale = []int{61, 61}, 30, 22
	p, err := NewParams(cp, enc, lit)
	if err != nil {
		b.Fatal(err)
	}
	sk, err := cp.GenSecrets(cp.NDB)
	if err != nil {
		b.Fatal(err)
	}
	keys, err := p.GenKeys(sk.DB[0])
	if err != nil {
		b.Fatal(err)
	}
	n := cp.NDB
	res := &ccmm.SharedA{LogN: irisFoldCCMM.LogNDB, Rows: n, Cols: k, Moduli: cp.Q, Scale: new(big.Int).SetUint64(cp.Delta)}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, q := range cp.Q {
		a, bm := ccmm.NewMat(n, k), ccmm.NewMat(n, k)
		for i := range a.Data {
			a.Data[i] = int32(rng.Int64N(int64(q))) - int32(q/2)
			bm.Data[i] = int32(rng.Int64N(int64(q))) - int32(q/2)
		}
		res.A, res.B = append(res.A, a), append(res.B, bm)
	}
	cols := make([]int, k)
	for i := range cols {
		cols[i] = i
	}
	ev := p.NewEvaluator(keys)
	overlap := func(row, col int) int { return 8000 + row%500 }
	var out []*rlwe.Ciphertext
	b.ResetTimer()
	for range b.N {
		if out, err = ev.Group(res, 0, cols, overlap); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N*k), "s/column")
	_ = out
}
