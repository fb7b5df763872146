package irisparams

import (
	"math/big"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"encmatch/core/iris/ccmm"
)

// BenchmarkProduct is the server's encrypted matrix product
// (ccmm.MultiplyRawFrom, then Rescale) of each secure preset at the iris
// size: one database block of 2^14 codes against a query of
// ENCMATCH_PRODUCT_BENCH_COLS columns (default 124: 4 eyes x 31
// rotations). The operands are random residues, not encryptions (the
// product's cost does not depend on the values), and the database block
// comes from memory, so the benchmark measures the arithmetic without the
// disk: `iris bench` reports the product with its reads.
func BenchmarkProduct(b *testing.B) {
	cols := 124
	if v, err := strconv.Atoi(os.Getenv("ENCMATCH_PRODUCT_BENCH_COLS")); err == nil && v > 0 {
		cols = v
	}
	for _, name := range []string{Default.Name, Fold.Name} {
		b.Run(name, func(b *testing.B) {
			p, err := ccmm.NewParams(Presets[name].CCMM)
			if err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			random := func(rows, cols int) ccmm.Mat {
				m := ccmm.NewMat(rows, cols)
				for i := range m.Data {
					m.Data[i] = int32(rng.IntN(1<<20)) - 1<<19 // a residue modulo every prime of both sets
				}
				return m
			}
			qry := &ccmm.SharedA{LogN: p.Lit.LogNQ, Rows: p.Lit.Inner, Cols: cols, Moduli: p.Q,
				Scale: new(big.Int).SetUint64(p.Delta)}
			for range p.Q {
				qry.A = append(qry.A, random(p.NQ, cols))
				qry.B = append(qry.B, random(p.Lit.Inner, cols))
			}
			src := &sameBlock{enc: random(p.NDB, p.Lit.Inner), encs: random(p.NDB, p.NQ)}
			b.ResetTimer()
			for range b.N {
				raw, err := p.MultiplyRawFrom(src, 1, qry)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := p.Rescale(raw); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(p.Q)+len(p.K)), "primes")
		})
	}
}

// sameBlock yields the first rows of one block of database residues again
// and again.
type sameBlock struct{ enc, encs ccmm.Mat }

func (s *sameBlock) Next(rows int, enc, encs *ccmm.Mat) error {
	*enc = ccmm.Mat{Rows: rows, Cols: s.enc.Cols, Data: s.enc.Data[:rows*s.enc.Cols]}
	*encs = ccmm.Mat{Rows: rows, Cols: s.encs.Cols, Data: s.encs.Data[:rows*s.encs.Cols]}
	return nil
}
