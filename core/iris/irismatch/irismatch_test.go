package irismatch

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"encmatch/core/iris/ccmm"
	"encmatch/core/iris/internal/ccmmtest"
	"encmatch/core/iris/internal/collectivetest"
	"encmatch/core/iris/scoreslots"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// toy is the INSECURE test chain: database ring 2^10 (two blocks of 1,024
// codes), codes of 1,024 positions, bootstrapping ring 2^12 (four result
// ciphertexts per half-bootstrap, 2,048 slots) with sparse-secret
// encapsulation, as the default preset.
type toy struct {
	cp    *ccmm.Params
	slots *scoreslots.Params
	kappa int
}

func newToy(t *testing.T) toy { return newToyOf(t, 0) }

// newToyOf is the toy chain for a threshold setup of n parties (n >= 2:
// query and database secrets of n shares, the ephemeral secret of n sparse shares,
// scoreslots.CollectiveSparseBootstrapping), or for one key holder (n =
// 0).
func newToyOf(t *testing.T, n int) toy {
	t.Helper()
	clit := ccmm.Literal{LogNDB: 10, LogNQ: 9, LogQ: []int{20, 20, 20}, LogK: []int{20, 20, 20}, LogScale: 18, Inner: 1024}
	if n > 1 { // the database enrolled with public keys: K two bits larger per prime for its noise
		clit.LogK, clit.QueryShares, clit.DBShares = []int{22, 22, 22}, n, n
	}
	cp, err := ccmm.NewParams(clit)
	if err != nil {
		t.Fatal(err)
	}
	const kappa = 10
	lit := scoreslots.Literal{LogN2: 12, LogQ0: 55, LogP: []int{61}, ScoreBits: 11, Levels: kappa + 1, LogLevel: 40,
		Bootstrapping: scoreslots.SparseBootstrapping([]int{61, 61})}
	if n > 1 {
		lit.EphemeralShares, lit.Bootstrapping = n, scoreslots.CollectiveSparseBootstrapping([]int{61, 61}, n, 32)
	}
	p, err := scoreslots.NewParams(cp, lit)
	if err != nil {
		t.Fatal(err)
	}
	return toy{cp: cp, slots: p, kappa: kappa}
}

// flipTo returns code with exactly the number of its unmasked positions
// flipped that makes its score against code equal to score (rounded).
func flipTo(rng *rand.Rand, code []int64, score float64) []int64 {
	var on []int
	for i, v := range code {
		if v != 0 {
			on = append(on, i)
		}
	}
	out := append([]int64(nil), code...)
	flips := int(math.Round(float64(len(on)) * (1 - score) / 2))
	for _, i := range rng.Perm(len(on))[:flips] {
		out[on[i]] = -out[on[i]]
	}
	return out
}

// model is the plaintext model: per eye, the exact bit (some pair with
// overlap > 0 has margin <c', c'> - delta M > 0) and whether some pair's
// normalised margin lies within band of 0 (a guard-band eye).
func model(db, q ccmm.IntMat, rotations int, delta, band float64) (bits []bool, guard []bool, overlap func(row, col int) int) {
	num, _ := ccmm.MulInt(db, q)
	ov := make([]int, db.Rows*q.Cols)
	for r := 0; r < db.Rows; r++ {
		for l := 0; l < db.Cols; l++ {
			if db.At(r, l) == 0 {
				continue
			}
			for j := 0; j < q.Cols; j++ {
				if q.At(l, j) != 0 {
					ov[r*q.Cols+j]++
				}
			}
		}
	}
	eyes := q.Cols / rotations
	bits, guard = make([]bool, eyes), make([]bool, eyes)
	for r := 0; r < db.Rows; r++ {
		for j := 0; j < q.Cols; j++ {
			m := ov[r*q.Cols+j]
			if m == 0 {
				continue
			}
			margin := (float64(num.At(r, j)) - delta*float64(m)) / float64(db.Cols)
			e := j / rotations
			bits[e] = bits[e] || margin > 0
			guard[e] = guard[e] || math.Abs(margin) <= band
		}
	}
	return bits, guard, func(row, col int) int { return ov[row*q.Cols+col] }
}

// TestPipelineMatchesModel runs the toy chain end to end: two database
// blocks of masked codes, a public-key query of 5 eyes x 5 rotations whose
// crafted pairs crowd the threshold from both sides just outside the
// comparator's band (and one pair inside it), the CCMM, the margins, the
// half-bootstraps, the classification and the reduction. Every eye outside
// the guard band decrypts within 10^-4 of the model's bit; the guard-band
// eye decrypts within 10^-4 of 0 or 1 (discretised).
//
// Run with one key holder's keys and with every key made by three parties
// (package collective, through collectivetest: query public key, block
// keys, relinearisation, Galois and encapsulation keys; the test enrolls
// with the summed secrets and decrypts with the summed bootstrapping
// secret, which no real party forms).
func TestPipelineMatchesModel(t *testing.T) {
	t.Run("one holder", func(t *testing.T) {
		tc := newToy(t)
		testPipelineMatchesModel(t, tc, func(db, q ccmm.IntMat) (*scoreslots.Keys, *ccmm.SharedA) {
			sk, res := ccmmtest.Product(t, tc.cp, db, q)
			keys, err := tc.slots.GenKeys(sk.DB, ReducerGaloisElements(tc.slots))
			if err != nil {
				t.Fatal(err)
			}
			return keys, res
		})
	})
	t.Run("three parties", func(t *testing.T) {
		tc := newToyOf(t, 3)
		testPipelineMatchesModel(t, tc, func(db, q ccmm.IntMat) (*scoreslots.Keys, *ccmm.SharedA) {
			setup := collectivetest.New(t, tc.slots, db.Rows/tc.cp.NDB, ReducerGaloisElements(tc.slots), []byte("encmatch irismatch test seed"))
			return setup.Keys, setup.Product(t, tc.cp, db, q)
		})
	})
}

// testPipelineMatchesModel is TestPipelineMatchesModel with the keys and
// the encrypted product that product makes for database db and query q.
func testPipelineMatchesModel(t *testing.T, tc toy, product func(db, q ccmm.IntMat) (*scoreslots.Keys, *ccmm.SharedA)) {
	const delta, rotations, eyes = 0.3, 5, 5
	rng := rand.New(rand.NewPCG(3, 9))
	d1, d2 := 2*tc.cp.NDB, tc.cp.Lit.Inner
	db := ccmmtest.Codes(rng, d1, d2)
	for l := 0; l < d2; l++ { // a padding row: no bit in its mask
		db.Data[(d1-1)*d2+l] = 0
	}
	q := ccmm.NewIntMat(d2, eyes*rotations)
	row := func(r int) []int64 { return db.Data[r*d2 : (r+1)*d2] }
	set := func(col int, code []int64) {
		for l, v := range code {
			q.Data[l*q.Cols+col] = v
		}
	}
	for j := 0; j < q.Cols; j++ { // impostors: fresh random codes
		set(j, ccmmtest.Codes(rng, 1, d2).Data)
	}
	// Scores are <c', c'> / M with M ~ 0.8 d2 here (the query columns are
	// database rows, same mask): margin ~ 0.8 (score - delta).
	set(0*rotations+2, flipTo(rng, row(7), 0.8))           // eye 0: a clear match (block 0)
	set(1*rotations+4, flipTo(rng, row(1500), delta+0.07)) // eye 1: just above the band (block 1)
	set(2*rotations+1, flipTo(rng, row(300), delta-0.07))  // eye 2: just below the band
	set(2*rotations+3, flipTo(rng, row(1900), delta-0.08))
	set(3*rotations+0, flipTo(rng, row(5), delta+0.005)) // eye 3: inside the band
	// eye 4: impostors only

	skeys, res := product(db, q)
	pl, err := NewPipeline(tc.slots, skeys, tc.kappa, delta, rotations)
	if err != nil {
		t.Fatal(err)
	}
	if pl.Discretiser == nil {
		t.Fatal("no discretiser with the sparse-secret encapsulation")
	}
	band := pl.Classifier.MarginBand(delta)
	bits, guard, overlap := model(db, q, rotations, delta, band)
	if want := []bool{true, true, false, true, false}; !slices.Equal(bits, want) || !slices.Equal(guard, []bool{false, false, false, true, false}) {
		t.Fatalf("the crafted data does not crowd the threshold as meant: bits %v, guard %v (band %.3f)", bits, guard, band)
	}
	out, st, err := pl.Match(res, overlap)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d eyes: %d half-bootstraps, %d classified, %d bootstraps in the reduction; margin band %.3f", eyes, st.HalfBootstraps, st.Classified, st.Bootstraps, band)
	all := decryptSlots(t, tc.slots, skeys.Secret, out)
	got := make([]float64, eyes)
	at := map[int]bool{}
	for e := range got {
		got[e] = all[ResultSlot(tc.slots, e)]
		at[ResultSlot(tc.slots, e)] = true
	}
	for e := 0; e < eyes; e++ {
		want := 0.0
		if bits[e] {
			want = 1
		}
		t.Logf("eye %d: %.6f (model %v, guard band %v)", e, got[e], bits[e], guard[e])
		if guard[e] {
			if math.Min(math.Abs(got[e]), math.Abs(got[e]-1)) > 1e-4 {
				t.Errorf("guard-band eye %d decrypts to %v, not discretised to 0 or 1", e, got[e])
			}
		} else if math.Abs(got[e]-want) > 1e-4 {
			t.Errorf("eye %d decrypts to %v, the model says %v", e, got[e], bits[e])
		}
	}
	for i, v := range all {
		if !at[i] && math.Abs(v) > 1e-3 {
			t.Fatalf("slot %d holds no eye but %v, want 0", i, v)
		}
	}
}

func decryptSlots(t *testing.T, p *scoreslots.Params, sk *rlwe.SecretKey, ct *rlwe.Ciphertext) []float64 {
	t.Helper()
	params := p.Bootstrap.BootstrappingParameters
	vals := make([]float64, ct.Slots())
	if err := ckks.NewEncoder(params).Decode(rlwe.NewDecryptor(params, sk).DecryptNew(ct), vals); err != nil {
		t.Fatal(err)
	}
	return vals
}
