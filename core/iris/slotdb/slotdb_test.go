package slotdb

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"encmatch/core/base/errs"
	"encmatch/core/iris/ccmm"
	"encmatch/core/iris/internal/ccmmtest"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// queries draws iris-like query columns and plants, in column 0, row
// `genuine` of db (a score equal to that code's unmasked bits), in column
// 1 its complement (the most negative score).
func queries(rng *rand.Rand, db ccmm.IntMat, cols, genuine int) ccmm.IntMat {
	q := ccmmtest.Codes(rng, db.Cols, cols)
	for l := 0; l < db.Cols; l++ {
		q.Data[l*cols] = db.At(genuine, l)
		q.Data[l*cols+1] = -db.At(genuine, l)
	}
	return q
}

// columnNorm2 is the squared norm of column j of q.
func columnNorm2(q ccmm.IntMat, j int) float64 {
	s := 0.0
	for l := 0; l < q.Rows; l++ {
		s += float64(q.At(l, j) * q.At(l, j))
	}
	return s
}

// scoreErrors compares, for every block and column, the scores decode
// gives with the exact product of db and q, and returns the largest error
// and the largest error relative to ErrorBound.
func scoreErrors(t *testing.T, e *Encoder, db, q ccmm.IntMat, decode func(block, col int) []float64) (worst, worstRatio float64) {
	t.Helper()
	want, err := ccmm.MulInt(db, q)
	if err != nil {
		t.Fatal(err)
	}
	n := e.N()
	for b := 0; b < db.Rows/n; b++ {
		for j := 0; j < q.Cols; j++ {
			got := decode(b, j)
			bound := e.ErrorBound(columnNorm2(q, j))
			for k, v := range got {
				d := math.Abs(v - float64(want.At(b*n+k, j)))
				worst, worstRatio = math.Max(worst, d), math.Max(worstRatio, d/bound)
			}
		}
	}
	return worst, worstRatio
}

// TestScoresDecodeFromEncodedBlocks is the plaintext model: the exact
// product of the encoded database by query columns decodes, code by code,
// to the exact scores within ErrorBound, at iris's own block size and
// code length (2^14 x 16,384, with ENCMATCH_IRIS_SLOW=1) and at a small
// one; a scale too small for
// the bound is seen to break it, so the comparison is not vacuous.
func TestScoresDecodeFromEncodedBlocks(t *testing.T) {
	cases := []struct {
		logN, inner, blocks, logScale int
	}{
		{8, 512, 2, 10},
		{14, 1 << 14, 1, 16},
	}
	if os.Getenv("ENCMATCH_IRIS_SLOW") == "" || testing.Short() {
		cases = cases[:1] // the iris size takes about 45 s on 2 cores
	}
	for _, c := range cases {
		e, err := NewEncoder(c.logN, c.logScale)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(uint64(c.logN), 3))
		db := ccmmtest.Codes(rng, c.blocks*e.N(), c.inner)
		q := queries(rng, db, 4, 5)
		enc, err := e.Encode(db)
		if err != nil {
			t.Fatal(err)
		}
		y, err := ccmm.MulInt(enc, q)
		if err != nil {
			t.Fatal(err)
		}
		worst, ratio := scoreErrors(t, e, db, q, func(b, j int) []float64 {
			col := make([]int64, e.N())
			for k := range col {
				col[k] = y.At(b*e.N()+k, j)
			}
			s, err := e.Scores(col)
			if err != nil {
				t.Fatal(err)
			}
			return s
		})
		t.Logf("N 2^%d, %d positions, scale 2^%d: largest entry %d, largest score error %.3g (%.2f of the bound %.3g for a full column)",
			c.logN, c.inner, c.logScale, enc.MaxAbs(), worst, ratio, e.ErrorBound(float64(c.inner)))
		if ratio > 1 {
			t.Fatalf("a decoded score is off by %.3g, %.2f times the bound", worst, ratio)
		}
		if worst > 0.5 {
			t.Fatalf("scale 2^%d leaves score errors of %.3g: the cases must round to the exact scores", c.logScale, worst)
		}
	}
	// At scale 2 the rounding must show: if it does not, the comparison
	// above does not look at what Encode wrote.
	e, _ := NewEncoder(8, 1)
	rng := rand.New(rand.NewPCG(9, 9))
	db := ccmmtest.Codes(rng, e.N(), 512)
	q := queries(rng, db, 2, 0)
	enc, _ := e.Encode(db)
	y, _ := ccmm.MulInt(enc, q)
	worst, _ := scoreErrors(t, e, db, q, func(_, j int) []float64 {
		col := make([]int64, e.N())
		for k := range col {
			col[k] = y.At(k, j)
		}
		s, _ := e.Scores(col)
		return s
	})
	if worst < 1 {
		t.Fatalf("at scale 2 the largest score error is %.3g: the rounding to integers is not in the model", worst)
	}
}

// TestLayout: a block whose only nonzero entries are codes 3 and N/2 + 7
// at position 0 decodes, against the unit query, to exactly those codes:
// code k in slot k's real part, code N/2 + k in its imaginary part.
func TestLayout(t *testing.T) {
	e, _ := NewEncoder(6, 20)
	db := ccmm.NewIntMat(e.N(), 1)
	db.Data[3], db.Data[e.N()/2+7] = 1, -1
	enc, err := e.Encode(db)
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.Scores(enc.Data)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range s {
		want := float64(db.Data[k])
		if math.Abs(v-want) > 1e-3 {
			t.Fatalf("code %d decodes to %.4g, want %v", k, v, want)
		}
	}
}

// toyCCMM is an INSECURE CCMM set for the encrypted test: database ring
// 2^10, 1,024 positions, Delta = 2^28 so that the encoded entries (up to
// about 2^10 at scale 2^12) keep the product's noise below Delta/2.
var toyCCMM = ccmm.Literal{LogNDB: 10, LogNQ: 9, LogQ: []int{20, 20, 20}, LogK: []int{20, 20, 20}, LogScale: 28, Inner: 1024}

// TestEncryptedProductHoldsScoresInSlots encrypts an encoded database of
// two blocks and a public-key query, multiplies them with the CCMM and
// checks each column, framed by Column, decrypts (Lattigo's decryptor and
// decoder) to the column's scores within ErrorBound plus NoiseBound: at
// Delta = 2^28, where the product also decrypts exactly to the product of
// the encoded matrices, and at Delta = 2^20, an Approximate set whose
// noise (2^25 predicted) rules out an exact decryption but not the slots.
func TestEncryptedProductHoldsScoresInSlots(t *testing.T) {
	const logScale = 12
	e, err := NewEncoder(toyCCMM.LogNDB, logScale)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(11, 12))
	db := ccmmtest.Codes(rng, 2*e.N(), toyCCMM.Inner)
	q := queries(rng, db, 6, e.N()+9)
	enc, err := e.Encode(db)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		logDelta    int
		approximate bool
	}{{28, false}, {20, true}} {
		lit := toyCCMM
		lit.MaxAbsDB, lit.LogScale, lit.Approximate = enc.MaxAbs(), c.logDelta, c.approximate
		if c.approximate {
			exact := lit
			exact.Approximate = false
			if _, err := ccmm.NewParams(exact); !errors.Is(err, ccmm.ErrModulus) {
				t.Fatalf("Delta 2^%d asks for an exact product: %v, want ErrModulus", c.logDelta, err)
			}
		}
		cp, err := ccmm.NewParams(lit)
		if err != nil {
			t.Fatal(err)
		}
		sk, res := ccmmtest.Product(t, cp, enc, q)
		if !c.approximate {
			exact, err := ccmm.Decrypt(cp.DB, sk.DB, res)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := ccmm.MulInt(enc, q)
			for i := range want.Data {
				if exact.Data[i] != want.Data[i] {
					t.Fatalf("entry %d decrypts to %d, the encoded product is %d", i, exact.Data[i], want.Data[i])
				}
			}
		}
		params, err := e.CKKSParameters(cp, nil, 30)
		if err != nil {
			t.Fatal(err)
		}
		dec := ckks.NewEncoder(params)
		decryptors := make([]*rlwe.Decryptor, len(sk.DB))
		for b, s := range sk.DB {
			key, err := cp.SecretAs(s, params)
			if err != nil {
				t.Fatal(err)
			}
			decryptors[b] = rlwe.NewDecryptor(params, key)
		}
		worst, _ := scoreErrors(t, e, db, q, func(b, j int) []float64 {
			ct, err := e.Column(params, cp, res, b, j)
			if err != nil {
				t.Fatal(err)
			}
			slots := make([]complex128, params.MaxSlots())
			if err := dec.Decode(decryptors[b].DecryptNew(ct), slots); err != nil {
				t.Fatal(err)
			}
			return Unpack(slots)
		})
		rounding, noise := e.ErrorBound(float64(toyCCMM.Inner)), e.NoiseBound(cp)
		t.Logf("Delta 2^%d: largest score error %.3g (rounding bound %.3g for a full column, noise bound %.3g); largest encoded entry %d",
			c.logDelta, worst, rounding, noise, enc.MaxAbs())
		if worst > rounding+noise {
			t.Fatalf("Delta 2^%d: a slot is off by %.3g, over the bound %.3g", c.logDelta, worst, rounding+noise)
		}
	}
}

// TestBadInput: shapes, scales and parameters that do not fit are refused
// as invalid or mismatched, not encoded.
func TestBadInput(t *testing.T) {
	for _, c := range []struct{ logN, logScale int }{{1, 10}, {18, 10}, {8, 0}, {8, 41}} {
		if _, err := NewEncoder(c.logN, c.logScale); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("NewEncoder(%d, %d): %v, want an invalid-argument error", c.logN, c.logScale, err)
		}
	}
	e, _ := NewEncoder(6, 10)
	if _, err := e.Encode(ccmm.NewIntMat(e.N()+1, 4)); !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("a database of %d rows: %v", e.N()+1, err)
	}
	if _, err := e.Scores(make([]int64, e.N()-1)); !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("a column of %d coefficients: %v", e.N()-1, err)
	}
	big, _ := NewEncoder(6, 40)
	huge := ccmm.NewIntMat(big.N(), 1)
	for i := range huge.Data {
		huge.Data[i] = 1 << 40
	}
	if _, err := big.Encode(huge); !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("entries of 2^40 at scale 2^40: %v, want a range error", err)
	}
	cp, err := ccmm.NewParams(ccmm.Toy)
	if err != nil {
		t.Fatal(err)
	}
	e7, _ := NewEncoder(cp.Lit.LogNDB+1, 10)
	if _, err := e7.CKKSParameters(cp, nil, 30); !errors.Is(err, errs.ErrMismatch) {
		t.Errorf("blocks of 2^7 against a CCMM of ring 2^%d: %v", cp.Lit.LogNDB, err)
	}
}
