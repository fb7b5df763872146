package irisquery

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"encmatch/core/base/envelope"
	"encmatch/core/base/errs"
	"encmatch/core/iris/foldmatch"
	"encmatch/core/iris/irisdb"
	"encmatch/core/iris/iriskeys"
)

// plant copies gallery code k into query row j with each usable bit
// flipped with probability flip, and returns the pair's FHD.
func plant(rng *rand.Rand, gallery, q irisdb.Codes, k, j int, flip float64) float64 {
	l := q.Len
	copy(q.Data[j*l:(j+1)*l], gallery.Data[k*l:(k+1)*l])
	flipped, usable := 0, 0
	for i := j * l; i < (j+1)*l; i++ {
		if q.Data[i] != 0 {
			usable++
			if rng.Float64() < flip {
				q.Data[i] = -q.Data[i]
				flipped++
			}
		}
	}
	return float64(flipped) / float64(usable)
}

// answer reads a fold pass's two decrypted bits as the receiver does: a
// decided sure bit is a match, two decided zero bits no match, anything
// else flagged (a bit inside its comparator's band can only flag).
func answer(sure, maybe float64) foldmatch.Answer {
	const decided = 1e-3
	switch {
	case sure >= 1-decided:
		return foldmatch.Match
	case sure <= decided && maybe <= decided:
		return foldmatch.NoMatch
	}
	return foldmatch.Flagged
}

// TestFoldFilesEndToEnd runs papers/004's second algorithm through every
// role's files at the toy-fold preset with the kappa-12 design
// (core/iris/fold/testdata): key generation, enrollment of 1,500 codes
// (two blocks, the second padded) with the design, a public-key query of
// five eyes x 8 rotations (one fold group of 8 per eye; python's test
// takes open-iris's 31), the fold pass, the key holder's decryption,
// then the pair pass on the flagged eyes. The eyes: one genuine (FHD
// 0.1, a clean match), one at FHD 0.3 (a match the design cannot call
// cleanly: flagged, then a match in the pair pass), one at FHD 0.39 (a
// non-match close enough to be flagged or answered no), one enrolled
// twice at FHD 0.05 (a clean match: duplicates only raise the sums), one
// with no planted code (a clean no). Every clean answer and every pair
// bit must equal exact brute force. Bad input: a design for another
// threshold, a pair pass on an eye the query does not have, a damaged
// fold key file.
func TestFoldFilesEndToEnd(t *testing.T) {
	design, err := os.ReadFile("../fold/testdata/design-kappa12.json")
	if err != nil {
		t.Fatal(err)
	}
	dir, holder := keySet(t, "toy-fold")
	rng := rand.New(rand.NewPCG(9, 4))
	const rotations, eyes, thr = 8, 5, 0.34
	l := holder.Params.CCMM.Lit.Inner
	gallery := randomCodes(rng, 1500, l)
	copy(gallery.Data[1400*l:1401*l], gallery.Data[20*l:21*l]) // code 20 enrolled twice
	q := randomCodes(rng, eyes*rotations, l)
	fhd := []float64{
		plant(rng, gallery, q, 700, 0*rotations+3, 0.1),
		plant(rng, gallery, q, 1100, 1*rotations+5, 0.3),
		plant(rng, gallery, q, 5, 2*rotations+7, 0.39),
		plant(rng, gallery, q, 20, 3*rotations+0, 0.05),
	}
	t.Logf("planted FHDs %.3f", fhd)
	want := modelBits(gallery, q, rotations, thr)
	if !want[0] || !want[1] || want[2] || !want[3] || want[4] {
		t.Fatalf("model bits %v, want [true true false true false]", want)
	}
	dbDir := filepath.Join(dir, "db")
	if _, err := irisdb.Enroll(holder, dbDir, gallery, 0.3, design); !errors.Is(err, errs.ErrMismatch) {
		t.Fatalf("a design for t = 0.34 enrolled at t = 0.3: %v", err)
	}
	if _, err := irisdb.Enroll(holder, dbDir, gallery, thr, nil); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("a folding enrollment without a design: %v", err)
	}
	if _, err := irisdb.Enroll(holder, dbDir, gallery, thr, design); err != nil {
		t.Fatal(err)
	}
	server, db, query, _ := encryptAndLoad(t, dir, dbDir, q, rotations, 0)
	out, kept := filepath.Join(dir, "fold.bin"), filepath.Join(dir, "product.bin")
	st, err := Match(server, db, query, out, Pass{Product: kept})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fold pass: product %.1fs, %d groups, %d refreshes, %d classified, %d reduction bootstraps, wall %v (fold %v, refresh %v, classify %v, reduce %v)",
		st.Product.Seconds(), st.Fold.Groups, st.Fold.Refreshes, st.Fold.Classified, st.Fold.ReductionBootstraps, st.Fold.Wall, st.Fold.Fold, st.Fold.Refresh, st.Fold.Classify, st.Fold.Reduce)
	res, err := DecryptFold(holder, out)
	if err != nil {
		t.Fatal(err)
	}
	if res.Pairs || res.Eyes != eyes || len(res.Sure) != eyes || len(res.Maybe) != eyes {
		t.Fatalf("fold result: pairs %v, %d eyes, %d sure and %d maybe bits", res.Pairs, res.Eyes, len(res.Sure), len(res.Maybe))
	}
	var flagged []int
	for e := range eyes {
		a := answer(res.Sure[e], res.Maybe[e])
		t.Logf("eye %d: sure %.5f maybe %.5f -> %d (model %v)", e, res.Sure[e], res.Maybe[e], a, want[e])
		switch {
		case a == foldmatch.Flagged:
			flagged = append(flagged, e)
		case (a == foldmatch.Match) != want[e]:
			t.Errorf("eye %d: a clean answer %d, the model says %v", e, a, want[e])
		}
	}
	for _, e := range []int{0, 3, 4} {
		if answer(res.Sure[e], res.Maybe[e]) == foldmatch.Flagged {
			t.Errorf("eye %d flagged: its scores are far from both of the design's clean limits", e)
		}
	}
	if answer(res.Sure[1], res.Maybe[1]) != foldmatch.Flagged {
		t.Errorf("eye 1 (FHD 0.3, under the design's clean yes) was not flagged")
	}
	if _, err := Match(server, db, query, filepath.Join(dir, "bad.bin"), Pass{PairEyes: []int{eyes}}); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("a pair pass on eye %d of %d: %v", eyes, eyes, err)
	}
	checkKeptProduct(t, server, db, query, kept, flagged)
	pairsOut := filepath.Join(dir, "pairs.bin")
	if st, err = Match(server, db, query, pairsOut, Pass{PairEyes: flagged, Product: kept}); err != nil {
		t.Fatal(err)
	}
	if !st.ProductFromFile {
		t.Error("the pair pass multiplied again with a kept product")
	}
	t.Logf("pair pass on %v: %d refreshes, wall %v", flagged, st.Fold.Refreshes, st.Fold.Wall)
	pr, err := DecryptFold(holder, pairsOut)
	if err != nil {
		t.Fatal(err)
	}
	if !pr.Pairs || pr.Maybe != nil || len(pr.Sure) != len(flagged) {
		t.Fatalf("pair result: pairs %v, listed %v, %d bits", pr.Pairs, pr.Listed, len(pr.Sure))
	}
	for i, e := range pr.Listed {
		w := 0.0
		if want[e] {
			w = 1
		}
		t.Logf("pair pass, eye %d: %.5f (model %v)", e, pr.Sure[i], want[e])
		if e != flagged[i] || math.Abs(pr.Sure[i]-w) > 1e-3 {
			t.Errorf("pair pass, eye %d (listed %d): %v, the model says %v", flagged[i], e, pr.Sure[i], want[flagged[i]])
		}
	}
	// A damaged fold key file is refused when the database loads.
	kf := filepath.Join(dbDir, "fold.keys")
	kb, err := os.ReadFile(kf)
	if err != nil {
		t.Fatal(err)
	}
	kb[len(kb)/2] ^= 1
	if err := os.WriteFile(kf, kb, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := irisdb.Load(server, dbDir); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("a damaged fold key file: %v, want ErrCorrupt", err)
	}
}

// FuzzParseFoldResult: any payload is a checked fold result or an
// ErrCorrupt (never a panic), and an accepted one lists increasing eyes
// below the query's, all of them for a fold pass.
func FuzzParseFoldResult(f *testing.F) {
	head := func(eyes, level, pass, listed, groups uint32) []byte {
		var b []byte
		for _, v := range []uint32{eyes, level, pass, listed, groups} {
			b = binary.LittleEndian.AppendUint32(b, v)
		}
		return b
	}
	list := func(eyes ...uint32) []byte {
		var b []byte
		for _, e := range eyes {
			b = binary.LittleEndian.AppendUint32(b, e)
		}
		return b
	}
	frame := func(chunks ...[]byte) []byte {
		var b []byte
		for _, c := range chunks {
			b = envelope.AppendChunk(b, c)
		}
		return b
	}
	f.Add(frame(head(2, 3, 0, 2, 2), list(0, 1), []byte("sure"), []byte("maybe")))
	f.Add(frame(head(5, 3, 1, 2, 31), list(1, 3), []byte("sure"), nil))
	f.Add(frame(head(5, 3, 1, 2, 31), list(3, 1), []byte("sure"), nil))
	f.Add(frame(head(5, 99, 0, 5, 2), list(0, 1, 2, 3, 4), []byte("s"), []byte("m")))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, fr, err := parseFoldResult(b, 20)
		if err != nil {
			if !errors.Is(err, errs.ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if fr.level > 20 || fr.groups < 1 || len(r.Listed) == 0 || (!r.Pairs && len(r.Listed) != r.Eyes) || (len(fr.maybe) == 0) != r.Pairs {
			t.Fatalf("accepted %+v, %+v", r, fr)
		}
		for i, e := range r.Listed {
			if e < 0 || e >= r.Eyes || (i > 0 && e <= r.Listed[i-1]) {
				t.Fatalf("accepted the eye list %v of %d eyes", r.Listed, r.Eyes)
			}
		}
	})
}

// checkKeptProduct: the product a fold pass kept, restricted to the pair
// pass's eyes, equals that product multiplied again, residue for residue;
// it is refused for another query, another database's matrices or with a
// flipped byte.
func checkKeptProduct(t *testing.T, server *iriskeys.Server, db *irisdb.DB, query *Query, kept string, eyes []int) {
	t.Helper()
	pass := Pass{PairEyes: eyes}
	fresh, _, err := product(server, db, query, pass)
	if err != nil {
		t.Fatal(err)
	}
	pass.Product = kept
	read, lq, err := product(server, db, query, pass)
	if err != nil {
		t.Fatal(err)
	}
	if lq.Eyes != len(eyes) || read.Cols != len(eyes)*query.Rotations || read.Rows != fresh.Rows {
		t.Fatalf("kept product of %d eyes: %dx%d, want %dx%d", lq.Eyes, read.Rows, read.Cols, fresh.Rows, fresh.Cols)
	}
	for i := range fresh.B {
		if !slices.Equal(read.A[i].Data, fresh.A[i].Data) || !slices.Equal(read.B[i].Data, fresh.B[i].Data) {
			t.Fatalf("prime %d: the kept product differs from the product multiplied again", i)
		}
	}
	other := *query
	other.Digest[0] ^= 1
	if _, _, err := product(server, db, &other, pass); !errors.Is(err, errs.ErrMismatch) {
		t.Fatalf("another query's kept product: %v, want ErrMismatch", err)
	}
	otherDB := *db
	otherDB.MatricesDigest[0] ^= 1
	if _, _, err := product(server, &otherDB, query, pass); !errors.Is(err, errs.ErrMismatch) {
		t.Fatalf("another database's kept product: %v, want ErrMismatch", err)
	}
	b, err := os.ReadFile(kept)
	if err != nil {
		t.Fatal(err)
	}
	flipped := filepath.Join(t.TempDir(), "flipped.bin")
	b[len(b)/2] ^= 1
	if err := os.WriteFile(flipped, b, 0o600); err != nil {
		t.Fatal(err)
	}
	pass.Product = flipped
	if _, _, err := product(server, db, query, pass); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("a damaged kept product: %v, want ErrCorrupt", err)
	}
}
