package irismatch

import (
	"math"
	"math/rand/v2"
	"testing"

	"encmatch/core/ccmm"
	"encmatch/core/comparator"
	"encmatch/core/internal/ccmmtest"
	"encmatch/core/scoreslots"

	"github.com/tuneinsight/lattigo/v6/circuits/ckks/bootstrapping"
	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// TestClassifyMatchesModel runs the toy chain end to end: masked codes in
// {-1, 0, 1}, a public-key query of 16 columns with planted partial matches
// whose normalised scores crowd the threshold, the CCMM, the half-bootstrap,
// the normalisation by the public overlaps and the comparator. Every pair
// whose normalised score lies outside the comparator's value band decrypts
// within 10^-3 of its exact match bit.
func TestClassifyMatchesModel(t *testing.T) {
	cp, err := ccmm.NewParams(ccmm.Literal{LogNDB: 10, LogNQ: 9, LogQ: []int{20, 20, 20}, LogK: []int{20, 20, 20}, LogScale: 18, Inner: 1024})
	if err != nil {
		t.Fatal(err)
	}
	const kappa, delta = 10, 0.3
	p, err := scoreslots.NewParams(cp, scoreslots.Literal{LogN2: 11, LogQ0: 55, LogP: []int{61}, ScoreBits: 10, Levels: kappa + 1, LogLevel: 40})
	if err != nil {
		t.Fatal(err)
	}
	cmp, err := comparator.New(kappa, delta, comparator.DefaultScoreScale)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 9))
	d1, d2, d3 := cp.NDB, cp.Lit.Inner, 16
	db := ccmmtest.Codes(rng, d1, d2)
	// Query column j is database row 5j with a flip rate that walks across
	// the threshold from column to column: normalised scores from about 0.9
	// down to 0.1, several of them near delta.
	q := ccmm.NewIntMat(d2, d3)
	for l := 0; l < d2; l++ {
		for j := 0; j < d3; j++ {
			v := db.At(5*j, l)
			flip := 0.05 + 0.4*float64(j)/float64(d3-1)
			if rng.Float64() < flip {
				v = -v
			}
			if rng.Float64() < 0.1 {
				v = 0 // the query's own mask
			}
			q.Data[l*d3+j] = v
		}
	}
	num, _ := ccmm.MulInt(db, q)
	overlaps := make([]int, d1*d3)
	for r := 0; r < d1; r++ {
		for j := 0; j < d3; j++ {
			for l := 0; l < d2; l++ {
				if db.At(r, l) != 0 && q.At(l, j) != 0 {
					overlaps[r*d3+j]++
				}
			}
		}
	}
	overlap := func(col, row int) int { return overlaps[row*d3+col] }

	sk, res := ccmmtest.Product(t, cp, db, q)
	lifted, err := p.Lift(res, 0)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := p.GenKeys(sk.DB[0])
	if err != nil {
		t.Fatal(err)
	}
	eval, err := bootstrapping.NewEvaluator(p.Bootstrap, keys.Eval)
	if err != nil {
		t.Fatal(err)
	}
	slots, err := p.ToSlots(eval, lifted)
	if err != nil {
		t.Fatal(err)
	}
	cl := NewClassifier(p, keys.Eval.MemEvaluationKeySet, cmp)
	params := p.Bootstrap.BootstrappingParameters
	dec, enc := rlwe.NewDecryptor(params, keys.Secret), ckks.NewEncoder(params)
	checked, near, ones, worst := 0, 0, 0, 0.0
	for s, ct := range slots {
		out, err := cl.Classify(s, ct, overlap)
		if err != nil {
			t.Fatal(err)
		}
		vals := make([]float64, out.Slots())
		if err := enc.Decode(dec.DecryptNew(out), vals); err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			col, row := p.SlotOf(s, i)
			score := float64(num.At(row, col)) / float64(overlap(col, row))
			if math.Abs(score-delta) <= cmp.ValueBand {
				near++
				continue
			}
			bit := 0.0
			if score >= delta {
				bit = 1
				ones++
			}
			worst = math.Max(worst, math.Abs(v-bit))
			checked++
		}
	}
	t.Logf("%d pairs checked, %d of them matches (%d inside the value band %.3f of delta %.1f), largest error %.2g",
		checked, ones, near, cmp.ValueBand, delta, worst)
	if worst > 1e-3 {
		t.Fatalf("match values off by %.3g", worst)
	}
	if checked+near != d1*d3 || checked < d1*d3*9/10 || ones < 4 {
		t.Fatalf("%d checked and %d near of %d pairs", checked, near, d1*d3)
	}
}
