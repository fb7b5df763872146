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

// irisBudget is the candidate modulus budget of docs/IRIS.md ("The
// modulus budget") at the iris size for a fold whose polynomials take
// depth levels: database and query rings 2^14 (Q is over the 218 bits
// ring 2^13 allows the query secret), 16,384 positions; Q two
// 20-bit primes for the sums, depth levels of 29 bits for f (and h), two
// of 22 bits at the top for the normalisation; K five primes of 30 bits
// and two of 29; Delta = 2^24; read as CKKS values (Approximate), database
// entries up to 2^13 (the slot encoding at c = 2^17).
func irisBudget(depth int) ccmm.Literal {
	lit := ccmm.Literal{LogNDB: 14, LogNQ: 14, Inner: 1 << 14, LogScale: 24, Approximate: true, MaxAbsDB: 1 << 13,
		LogQ: []int{20, 20}, LogK: []int{30, 30, 30, 30, 30, 29, 29}}
	for range depth {
		lit.LogQ = append(lit.LogQ, 29)
	}
	lit.LogQ = append(lit.LogQ, 22, 22)
	return lit
}

// BenchmarkGroup measures Group at the iris size on a fold group of k
// columns (ENCMATCH_FOLD_BENCH_K, default 4) of random residues (the
// work does not depend on the values): per column one conjugation and two
// normalisations, then two evaluations of the degree-15 design ("f"), or
// of the two-polynomial design's f and h from one power basis ("f+h"),
// with the workers of parallel.For, over irisBudget for each design.
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
	cl := irisBudget(lit.Depth())
	cp, err := ccmm.NewParams(cl)
	if err != nil {
		b.Fatal(err)
	}
	enc, err := slotdb.NewEncoder(cl.LogNDB, 17)
	if err != nil {
		b.Fatal(err)
	}
	lit.LogP, lit.LogScale, lit.GroupSize, lit.LogMessageRatio = []int{61, 61}, 29, k, toyMessageRatio
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
	res := &ccmm.SharedA{LogN: cl.LogNDB, Rows: n, Cols: k, Moduli: cp.Q, Scale: new(big.Int).SetUint64(cp.Delta)}
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
