package irisparams

import (
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"testing"

	"encmatch/core/iris/ccmm"
	"encmatch/core/iris/fold"
	"encmatch/core/iris/foldmatch"
	"encmatch/core/iris/slotdb"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// TestFoldPresetPrecision measures the fold of the fold preset at its own
// parameters (ring 2^14, its primes and scales): the kappa-12 design's f
// and h on a group of k = 16 columns, and the pair pass's x on groups of
// one, on every slot of a block of 16,384 codes whose scores cover the
// whole range and crowd the thresholds (one column near the score
// threshold, several near it, sixteen matching columns, no common bit,
// impostors). Each column's scores carry an error up to the product's
// slot noise bound plus the encoding's rounding bound, so the column is as
// noisy as the product may make it; the plaintext model reads the exact
// scores. Every sum must be one that the classifiers' checks allow: off by
// at most the preset's EvalError (PairEvalError for the pair pass), or far
// enough from the threshold that its error cannot carry it across the
// comparator's band. (At a sum scale of 2^20 the sums of h were off by up
// to 0.2 and x by 0.024, four and two times the 0.05 and 0.01 allowed: the
// reason each polynomial's sums now leave at fold.Params.SumScale.)
func TestFoldPresetPrecision(t *testing.T) {
	c := newPresetColumns(t)
	t.Logf("sum scales: f 2^%.2f, h 2^%.2f, the pair pass's x 2^%.2f",
		c.fp.SumScale(0).Log2(), c.fp.SumScale(1).Log2(), c.pfp.SumScale(0).Log2())
	sums := c.fold(t, c.fp, c.res, c.dots, c.overlap, c.lit.GroupSize)
	checkSums(t, "f", c.sums(t, sums, 0), c.lit.Sure, c.lit.EvalError)
	checkSums(t, "h", c.sums(t, sums, 1), *c.lit.Maybe, c.lit.EvalError)
	for _, x := range c.pairs(t) {
		checkSums(t, "pair x", c.sums(t, x, 0), c.plit.Sure, c.plit.EvalError)
	}
}

// TestFoldPresetRefreshPrecision (slow: ENCMATCH_IRIS_SLOW=1, about three
// minutes and 10 GB) refreshes TestFoldPresetPrecision's sums as the
// server's pipeline does (the lift, the packing into ring 2^16, the
// bootstrap, the unmixing, each polynomial's sums divided by the width of
// the range its classifiers read) and checks them the same way: the whole
// error that the preset's EvalError (PairEvalError) bounds.
func TestFoldPresetRefreshPrecision(t *testing.T) {
	if os.Getenv("ENCMATCH_IRIS_SLOW") != "1" {
		t.Skip("slow (about three minutes, 10 GB): set ENCMATCH_IRIS_SLOW=1")
	}
	c := newPresetColumns(t)
	s := c.p.Slots
	keys, err := s.GenKeys(c.sk.DB, fold.UnmixGaloisElements(s))
	if err != nil {
		t.Fatal(err)
	}
	evals, err := s.NewEvaluators(keys)
	if err != nil {
		t.Fatal(err)
	}
	bp := s.Bootstrap.BootstrappingParameters
	dec, enc := rlwe.NewDecryptor(bp, keys.Secret), ckks.NewEncoder(bp)
	refresh := func(name string, fp *fold.Params, lit foldmatch.Literal, results []foldResult) {
		classifiers := []foldmatch.Classifier{lit.Sure}
		if lit.Maybe != nil {
			classifiers = append(classifiers, *lit.Maybe)
		}
		widths := make([]float64, len(classifiers))
		var in []fold.Sums
		for i, cl := range classifiers {
			lo, hi := lit.Domain(cl)
			widths[i] = hi - lo // as the pipeline divides them
			in = append(in, fold.Sums{Poly: i, Sums: []*rlwe.Ciphertext{results[i].ct}})
		}
		r, err := fp.NewRefresher(s, evals, lit.GroupSize, widths)
		if err != nil {
			t.Fatal(err)
		}
		outs, err := r.RefreshAll(in)
		if err != nil {
			t.Fatal(err)
		}
		half := fp.CKKS.N() / 2
		for i, out := range outs {
			slots := make([]complex128, bp.MaxSlots())
			if err := enc.Decode(dec.DecryptNew(out), slots); err != nil {
				t.Fatal(err)
			}
			got := make([]float64, fp.CKKS.N())
			for m := range half {
				got[m], got[m+half] = real(slots[m])*widths[i], imag(slots[m])*widths[i]
			}
			checkSums(t, name[i:i+1]+" refreshed", [2][]float64{got, results[i].want}, classifiers[i], lit.EvalError)
		}
	}
	refresh("fh", c.fp, c.lit, c.fold(t, c.fp, c.res, c.dots, c.overlap, c.lit.GroupSize))
	for _, x := range c.pairs(t) {
		refresh("x", c.pfp, c.plit, x)
	}
}

// pairs folds columns 0 and 1 alone with the pair pass (each near the
// threshold in the codes that plant one there).
func (c *presetColumns) pairs(t *testing.T) [][]foldResult {
	var out [][]foldResult
	for j := range 2 {
		out = append(out, c.fold(t, c.pfp, resultColumn(c.res, j), dotsColumn(c.dots, j), func(row, _ int) int { return c.overlap(row, j) }, 1))
	}
	return out
}

// presetColumns is the fold preset with the kappa-12 design and its pair
// pass, a database secret, and one block's k result columns encrypted
// under it (groupScores, encryptColumns).
type presetColumns struct {
	p          *Params
	fp, pfp    *fold.Params
	lit, plit  foldmatch.Literal
	sk         *ccmm.Secrets
	dots       ccmm.IntMat
	overlap    func(row, col int) int
	res        *ccmm.SharedA
	decryptors map[*fold.Params]*rlwe.Decryptor
}

// newPresetColumns builds the fold preset's design and pair folds, a
// database secret and one block's encrypted columns of groupScores.
func newPresetColumns(t *testing.T) *presetColumns {
	t.Helper()
	d := kappa12Design(t)
	c := &presetColumns{p: build(t, "fold", 0), decryptors: map[*fold.Params]*rlwe.Decryptor{}}
	var err error
	if c.fp, c.lit, err = c.p.DesignFold(d, 31); err != nil {
		t.Fatal(err)
	}
	if c.pfp, c.plit, err = c.p.PairFold(d.Delta, 31); err != nil {
		t.Fatal(err)
	}
	cp := c.p.CCMM
	if c.sk, err = cp.GenSecrets(cp.NDB); err != nil {
		t.Fatal(err)
	}
	var overlaps []int
	var noisy [][]float64
	c.dots, overlaps, noisy = groupScores(rand.New(rand.NewPCG(3, 4)), cp.NDB, c.lit.GroupSize, c.fp.Lit.Delta,
		c.p.Encoder.NoiseBound(cp)+c.p.Encoder.ErrorBound(float64(cp.Lit.Inner)))
	c.overlap = func(row, col int) int { return overlaps[row*c.lit.GroupSize+col] }
	c.res = encryptColumns(t, c.p, c.fp, c.sk.DB[0], noisy)
	return c
}

// foldResult is one fold polynomial's sums: the ciphertext and the
// plaintext model's values.
type foldResult struct {
	ct   *rlwe.Ciphertext
	want []float64
	fp   *fold.Params
}

// fold folds the k columns of res (block 0) with fp: one result per fold
// polynomial.
func (c *presetColumns) fold(t *testing.T, fp *fold.Params, res *ccmm.SharedA, dots ccmm.IntMat, overlap func(row, col int) int, k int) []foldResult {
	t.Helper()
	keys, err := fp.GenKeys(c.sk.DB[0])
	if err != nil {
		t.Fatal(err)
	}
	cols := make([]int, k)
	for j := range cols {
		cols[j] = j
	}
	cts, err := fp.NewEvaluator(keys).Group(res, 0, cols, overlap)
	if err != nil {
		t.Fatal(err)
	}
	want := fp.GroupModel(dots, 0, cols, overlap)
	out := make([]foldResult, len(cts))
	for i, ct := range cts {
		out[i] = foldResult{ct: ct, want: want[i], fp: fp}
	}
	return out
}

// sums decrypts result i: the sums and the model's, per code.
func (c *presetColumns) sums(t *testing.T, r []foldResult, i int) [2][]float64 {
	t.Helper()
	fp := r[i].fp
	dec := c.decryptors[fp]
	if dec == nil {
		key, err := c.p.CCMM.SecretAs(c.sk.DB[0], fp.CKKS)
		if err != nil {
			t.Fatal(err)
		}
		dec = rlwe.NewDecryptor(fp.CKKS, key)
		c.decryptors[fp] = dec
	}
	slots := make([]complex128, fp.CKKS.MaxSlots())
	if err := ckks.NewEncoder(fp.CKKS).Decode(dec.DecryptNew(r[i].ct), slots); err != nil {
		t.Fatal(err)
	}
	return [2][]float64{slotdb.Unpack(slots), r[i].want}
}

// checkSums checks decrypted sums against the model for a classifier: each
// inside the domain the comparator reads (foldmatch.Literal.Domain) and
// off by at most evalError, or by less than its
// distance to the threshold minus the comparator's band (tolerance -
// evalError), so that no bit the model settles can change.
func checkSums(t *testing.T, name string, s [2][]float64, c foldmatch.Classifier, evalError float64) {
	t.Helper()
	got, want := s[0], s[1]
	band := c.Tolerance - evalError
	lo, hi := foldmatch.Literal{EvalError: evalError}.Domain(c)
	worst, worstNear, at := 0.0, 0.0, 0
	for m := range got {
		e := math.Abs(got[m] - want[m])
		if e > worst {
			worst, at = e, m
		}
		if math.Abs(want[m]-c.At) <= 2*c.Tolerance {
			worstNear = math.Max(worstNear, e)
		}
		if got[m] < lo || got[m] > hi {
			t.Fatalf("%s: a sum of %.4g decrypts to %.4g, outside the comparator's domain [%v, %v]", name, want[m], got[m], lo, hi)
		}
		if e > evalError && e >= math.Abs(want[m]-c.At)-band {
			t.Fatalf("%s: a sum of %.4g decrypts to %.4g: off by %.3g, over the evaluation error %v, %.3g from the threshold %v",
				name, want[m], got[m], e, evalError, math.Abs(want[m]-c.At), c.At)
		}
	}
	t.Logf("%s: %d sums, largest error %.3g (at a sum of %.4g), within %.4g of the threshold %.4g: %.3g (allowed %v)",
		name, len(got), worst, want[at], 2*c.Tolerance, c.At, worstNear, evalError)
}

// resultColumn is column j of a result, alone.
func resultColumn(res *ccmm.SharedA, j int) *ccmm.SharedA {
	out := &ccmm.SharedA{LogN: res.LogN, Rows: res.Rows, Cols: 1, Moduli: res.Moduli, Scale: res.Scale}
	for i := range res.Moduli {
		a, b := ccmm.NewMat(res.A[i].Rows, 1), ccmm.NewMat(res.B[i].Rows, 1)
		for r := range a.Rows {
			a.Data[r] = res.A[i].Data[r*res.Cols+j]
		}
		for r := range b.Rows {
			b.Data[r] = res.B[i].Data[r*res.Cols+j]
		}
		out.A, out.B = append(out.A, a), append(out.B, b)
	}
	return out
}

// dotsColumn is column j of a matrix of dot products, alone.
func dotsColumn(m ccmm.IntMat, j int) ccmm.IntMat {
	out := ccmm.IntMat{Rows: m.Rows, Cols: 1, Data: make([]int64, m.Rows)}
	for r := range m.Rows {
		out.Data[r] = m.Data[r*m.Cols+j]
	}
	return out
}

// groupScores draws the scores of n codes against k columns: exact dot
// products and overlaps, as the plaintext model reads them, and the dot
// products with an error uniform in [-noise, noise], as the encrypted
// columns hold them. Codes (by row, in eighths of n): scores over the
// whole range [-1, 1]; one column near the threshold delta, the others
// impostors; two to six columns near delta; sixteen matching columns; no
// common bit in any column; impostors. In the second eighth column 0
// (even codes) or 1 (odd codes) is near delta too, for the pair pass.
func groupScores(rng *rand.Rand, n, k int, delta, noise float64) (ccmm.IntMat, []int, [][]float64) {
	dots, overlaps := ccmm.IntMat{Rows: n, Cols: k, Data: make([]int64, n*k)}, make([]int, n*k)
	noisy := make([][]float64, k)
	for j := range noisy {
		noisy[j] = make([]float64, n)
	}
	impostor := func() float64 { return math.Max(-1, math.Min(1, 0.05*rng.NormFloat64())) }
	near := func() float64 { return delta + 0.04*(2*rng.Float64()-1) }
	for row := range n {
		scores := make([]float64, k)
		for j := range scores {
			scores[j] = impostor()
		}
		switch row * 8 / n {
		case 0:
			for j := range scores {
				scores[j] = 2*rng.Float64() - 1
			}
		case 1:
			scores[rng.IntN(k)] = near()
			scores[row%2] = near()
		case 2:
			for range 2 + rng.IntN(5) {
				scores[rng.IntN(k)] = near()
			}
		case 3:
			for j := range scores {
				scores[j] = delta + (1-delta)*rng.Float64()
			}
		}
		for j, s := range scores {
			ov := 5000 + rng.IntN(4000)
			if row*8/n == 4 {
				ov = 0
			}
			dot := int64(math.Round(s * float64(ov)))
			dots.Data[row*k+j], overlaps[row*k+j] = dot, ov
			noisy[j][row] = float64(dot) + noise*(2*rng.Float64()-1)
		}
	}
	return dots, overlaps, noisy
}

// encryptColumns encrypts each column's scores in the slot layout of a
// slot-encoded product (codes m and m + N/2 in slot m) at the column scale
// Delta c under the database secret, and lays the ciphertexts out as a
// rescaled CCMM result of one block (slotdb.Encoder.Column's input).
func encryptColumns(t *testing.T, p *Params, fp *fold.Params, dbSecret *rlwe.SecretKey, cols [][]float64) *ccmm.SharedA {
	t.Helper()
	cp, params := p.CCMM, fp.CKKS
	key, err := cp.SecretAs(dbSecret, params)
	if err != nil {
		t.Fatal(err)
	}
	n, half := params.N(), params.N()/2
	res := &ccmm.SharedA{LogN: params.LogN(), Rows: n, Cols: len(cols), Moduli: cp.Q, Scale: new(big.Int).SetUint64(cp.Delta)}
	for range cp.Q {
		res.A, res.B = append(res.A, ccmm.NewMat(n, len(cols))), append(res.B, ccmm.NewMat(n, len(cols)))
	}
	encoder, encryptor := ckks.NewEncoder(params), rlwe.NewEncryptor(params, key)
	r := params.RingQ()
	for j, scores := range cols {
		slots := make([]complex128, half)
		for m := range slots {
			slots[m] = complex(scores[m], scores[m+half])
		}
		pt := ckks.NewPlaintext(params, params.MaxLevel())
		pt.Scale = p.Encoder.ColumnScale(cp)
		if err := encoder.Encode(slots, pt); err != nil {
			t.Fatal(err)
		}
		ct, err := encryptor.EncryptNew(pt)
		if err != nil {
			t.Fatal(err)
		}
		for u, dst := range [][]ccmm.Mat{res.B, res.A} {
			poly := ct.Value[u]
			r.INTT(poly, poly)
			for i, q := range cp.Q {
				for c := range n {
					v := int64(poly.Coeffs[i][c])
					if v > int64(q/2) {
						v -= int64(q)
					}
					dst[i].Data[c*len(cols)+j] = int32(v)
				}
			}
		}
	}
	return res
}
