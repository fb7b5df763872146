// Package irisquery holds an encrypted iris query's life (docs/IRIS.md,
// "Roles and files"): a querier's EncryptQuery (public key only), the
// server's LoadQuery and Match (the product against an irisdb database,
// then irismatch's pipeline), and the key holder's Decrypt of the result:
// one bit per eye.
package irisquery

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/big"
	"time"

	"encmatch/core/base/codec"
	"encmatch/core/base/envelope"
	"encmatch/core/base/errs"
	"encmatch/core/iris/ccmm"
	"encmatch/core/iris/fold"
	"encmatch/core/iris/foldmatch"
	"encmatch/core/iris/irisdb"
	"encmatch/core/iris/iriskeys"
	"encmatch/core/iris/irismatch"
	"encmatch/core/iris/scoreslots"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// An encrypted query (frame "iris-query") is three chunks: u32 eyes and
// u32 rotations; the masks of its eyes x rotations columns, in the clear
// (papers/004 §3.1); the query matrix (code positions x columns) in
// shared-a format under the query public key.

// MaxColumns bounds the columns (eyes x rotations) of one query.
const MaxColumns = 1 << 14

// EncryptQuery encrypts the rotated codes of a batch of eyes (row
// e*rotations + r of codes: eye e at its r-th rotation) under the query
// public key and writes the query to path.
func EncryptQuery(q *iriskeys.Querier, path string, codes irisdb.Codes, rotations int) error {
	p := q.Params
	if rotations < 1 || codes.Rows%rotations != 0 || codes.Rows > MaxColumns {
		return fmt.Errorf("%w: %d query rows for %d rotations per eye (at most %d rows)", errs.ErrInvalid, codes.Rows, rotations, MaxColumns)
	}
	if err := codes.Check(p.CCMM.Lit.Inner, "query"); err != nil {
		return err
	}
	m := ccmm.NewIntMat(codes.Len, codes.Rows) // positions x columns
	for c := 0; c < codes.Rows; c++ {
		for l, v := range codes.Data[c*codes.Len : (c+1)*codes.Len] {
			m.Data[l*codes.Rows+c] = int64(v)
		}
	}
	ct, err := p.CCMM.EncryptQueryPK(q.PublicKey, m)
	if err != nil {
		return err
	}
	var head, masks, body bytes.Buffer
	_ = binary.Write(&head, binary.LittleEndian, [2]uint32{uint32(codes.Rows / rotations), uint32(rotations)})
	if err := irisdb.WriteWords(&masks, codes.Masks(codes.Rows)); err != nil {
		return err
	}
	if _, err := ct.WriteTo(&body); err != nil {
		return err
	}
	payload := envelope.AppendChunk(envelope.AppendChunk(envelope.AppendChunk(nil, head.Bytes()), masks.Bytes()), body.Bytes())
	return envelope.WriteFile(path, q.Header("iris-query"), payload, 0o644)
}

// Query is a loaded encrypted query.
type Query struct {
	Eyes, Rotations int
	Masks           []uint64
	Matrix          *ccmm.SharedA
	// Digest is the SHA-256 of the query file's payload: a product kept
	// between two passes is bound to it.
	Digest [sha256.Size]byte
}

// listed is the query restricted to the columns of the listed eyes, in
// that order (a pair pass multiplies only those).
func (q *Query) listed(eyes []int) (*Query, error) {
	r := q.Rotations
	words := len(q.Masks) / (q.Eyes * r)
	cols := q.columns(eyes)
	var masks []uint64
	for _, c := range cols {
		masks = append(masks, q.Masks[c*words:(c+1)*words]...)
	}
	m, err := q.Matrix.Columns(cols)
	if err != nil {
		return nil, err
	}
	return &Query{Eyes: len(eyes), Rotations: r, Masks: masks, Matrix: m, Digest: q.Digest}, nil
}

// columns are the query's columns of the listed eyes (every rotation of
// each), in that order.
func (q *Query) columns(eyes []int) []int {
	var cols []int
	for _, e := range eyes {
		for k := range q.Rotations {
			cols = append(cols, e*q.Rotations+k)
		}
	}
	return cols
}

// LoadQuery reads an encrypted query for the server s's key set.
func LoadQuery(s *iriskeys.Server, path string) (*Query, error) {
	p := s.Params
	b, err := envelope.ReadFile(path, s.Header("iris-query"))
	if err != nil {
		return nil, err
	}
	parts, head, err := framedParts(b, 3, "query")
	if err != nil {
		return nil, err
	}
	eyes, rot := head[0], head[1]
	if eyes < 1 || rot < 1 || eyes*rot > MaxColumns {
		return nil, fmt.Errorf("%w: query of %d eyes x %d rotations", errs.ErrCorrupt, eyes, rot)
	}
	q := &Query{Eyes: eyes, Rotations: rot, Digest: sha256.Sum256(b)}
	if q.Masks, err = irisdb.ReadWords(parts[1], eyes*rot*p.CCMM.Lit.Inner/64, "query masks"); err != nil {
		return nil, err
	}
	want := &ccmm.SharedA{LogN: p.CCMM.Lit.LogNQ, Rows: p.CCMM.Lit.Inner, Cols: eyes * rot, Moduli: p.CCMM.Q, Scale: new(big.Int).SetUint64(p.CCMM.Delta)}
	if q.Matrix, err = ccmm.ReadSharedA(bytes.NewReader(parts[2]), int64(len(parts[2])), want); err != nil {
		return nil, err
	}
	return q, nil
}

// Stats reports a Match: the stages' times and the pipeline's counts,
// Algorithm 1's (Pairs) or Algorithm 2's (Fold).
type Stats struct {
	// Product is the encrypted matrix product's time (GEMMs and rescale,
	// and writing it when kept), or reading the product the fold pass
	// kept (ProductFromFile).
	Product         time.Duration
	ProductFromFile bool
	Pairs           *irismatch.Stats
	Fold            *foldmatch.Stats
}

// Pass says what a Match on a folding database runs: every eye through
// the fold (the zero Pass), or the listed eyes through the pair pass
// (PairEyes: the eyes a fold result flagged, by index in the query).
// Other databases take only the zero Pass.
type Pass struct {
	PairEyes []int
	// Product, if set, is a file that keeps the encrypted product between
	// the two passes of one query (a folding database only): the fold
	// pass writes its rescaled product there, and the pair pass reads it
	// instead of multiplying again (it refuses a product of another query
	// or database).
	Product string
}

// readsProduct says whether the pass reads a kept product instead of
// multiplying: a pair pass with Product.
func (p Pass) readsProduct() bool { return p.PairEyes != nil && p.Product != "" }

// Match runs the server s's encrypted matching of a query against a
// database and writes the encrypted result to out: one bit per eye
// (Algorithm 1), or with a folding database a sure and a maybe bit per
// eye (the fold pass) or one bit per listed eye (the pair pass).
func Match(s *iriskeys.Server, db *irisdb.DB, q *Query, out string, pass Pass) (*Stats, error) {
	p := s.Params
	if !db.Meta.Fold && pass.PairEyes != nil {
		return nil, fmt.Errorf("%w: a pair pass needs a folding database", errs.ErrInvalid)
	}
	if pass.PairEyes != nil {
		if err := checkEyeList(pass.PairEyes, q.Eyes); err != nil {
			return nil, fmt.Errorf("%w: the pair pass's eyes: %v", errs.ErrInvalid, err)
		}
	}
	if pass.Product != "" && !db.Meta.Fold {
		return nil, fmt.Errorf("%w: a product kept between passes needs a folding database", errs.ErrInvalid)
	}
	queryEyes := q.Eyes
	start := time.Now()
	res, q, err := product(s, db, q, pass)
	if err != nil {
		return nil, err
	}
	st := &Stats{Product: time.Since(start), ProductFromFile: pass.readsProduct()}
	words := p.CCMM.Lit.Inner / 64
	rows := db.Meta.Blocks * p.CCMM.NDB
	ov := irisdb.Overlaps(db.Masks, q.Masks, rows, q.Eyes*q.Rotations, words)
	overlap := func(row, col int) int { return int(ov[row*q.Eyes*q.Rotations+col]) }
	keys := *s.Keys
	keys.Blocks = db.Blocks
	if db.Meta.Fold {
		return st, matchFold(s, db, queryEyes, q.Rotations, res, overlap, &keys, pass, st, out)
	}
	pl, err := irismatch.NewPipeline(p.Slots, &keys, p.Kappa, db.Meta.Delta, q.Rotations)
	if err != nil {
		return nil, err
	}
	ct, pst, err := pl.Match(res, overlap)
	if err != nil {
		return nil, err
	}
	st.Pairs = pst
	b, err := ct.MarshalBinary()
	if err != nil {
		return nil, err
	}
	var head bytes.Buffer
	_ = binary.Write(&head, binary.LittleEndian, [2]uint32{uint32(q.Eyes), uint32(ct.Level())})
	payload := envelope.AppendChunk(envelope.AppendChunk(nil, head.Bytes()), b)
	return st, envelope.WriteFile(out, s.Header("iris-result"), payload, 0o644)
}

// Decrypt reads an encrypted result with the key holder h's keys and
// returns each eye's value (1: the eye matches some code, 0: it matches
// none; an eye inside the comparator's guard band reads 0 or 1 when the
// server discretised the result, a value between them otherwise).
func Decrypt(h *iriskeys.Holder, path string) ([]float64, error) {
	bp := h.Params.Slots.Bootstrap.BootstrappingParameters
	b, err := envelope.ReadFile(path, h.Header("iris-result"))
	if err != nil {
		return nil, err
	}
	parts, head, err := framedParts(b, 2, "result")
	if err != nil {
		return nil, err
	}
	eyes, level := head[0], head[1]
	if eyes < 1 || eyes > bp.MaxSlots() || level > bp.MaxLevel() {
		return nil, fmt.Errorf("%w: result of %d eyes at level %d", errs.ErrCorrupt, eyes, level)
	}
	ct, err := codec.DecodeCiphertext(parts[1], bp, 1, level, "result")
	if err != nil {
		return nil, err
	}
	vals := make([]float64, bp.MaxSlots())
	if err := ckks.NewEncoder(bp).Decode(rlwe.NewDecryptor(bp, h.Bootstrap).DecryptNew(ct), vals); err != nil {
		return nil, err
	}
	out := make([]float64, eyes)
	for e := range out {
		out[e] = vals[irismatch.ResultSlot(h.Params.Slots, e)]
	}
	return out, nil
}

// A folding database's result (frame "iris-fold-result") is four chunks:
// u32 eyes of the query, u32 level, u32 pass (0: fold, 1: pairs), u32
// listed eyes, u32 fold groups per eye (which sets the slots' layout,
// foldmatch.ResultSlot); the listed eyes (u32 each, the query's indices); the sure
// bits' ciphertext; the maybe bits' (empty for the pair pass).
const kindFoldResult = "iris-fold-result"

// matchFold runs Algorithm 2's pass on the rescaled product res (the
// columns of the listed eyes: the pair pass's, or all queryEyes of the
// query) and writes its result.
func matchFold(s *iriskeys.Server, db *irisdb.DB, queryEyes, rotations int, res *ccmm.SharedA, overlap func(row, col int) int,
	keys *scoreslots.Keys, pass Pass, st *Stats, out string) error {
	p := s.Params
	var fp *fold.Params
	var lit foldmatch.Literal
	var err error
	eyes := pass.PairEyes
	if eyes == nil {
		fp, lit, err = p.DesignFold(db.Design, rotations)
		eyes = make([]int, queryEyes)
		for e := range eyes {
			eyes[e] = e
		}
	} else {
		fp, lit, err = p.PairFold(db.Meta.Delta, rotations)
	}
	if err != nil {
		return err
	}
	pl, err := foldmatch.NewPipeline(fp, p.Slots, db.FoldKeys, keys, lit)
	if err != nil {
		return err
	}
	sure, maybe, fst, err := pl.Match(res, nil, overlap) // res holds the listed eyes' columns, and only those
	if err != nil {
		return err
	}
	st.Fold = fst
	head := binary.LittleEndian.AppendUint32(nil, uint32(queryEyes))
	head = binary.LittleEndian.AppendUint32(head, uint32(sure.Level()))
	head = binary.LittleEndian.AppendUint32(head, uint32(boolInt(pass.PairEyes != nil)))
	head = binary.LittleEndian.AppendUint32(head, uint32(len(eyes)))
	head = binary.LittleEndian.AppendUint32(head, uint32(pl.Groups()))
	var list []byte
	for _, e := range eyes {
		list = binary.LittleEndian.AppendUint32(list, uint32(e))
	}
	payload := envelope.AppendChunk(envelope.AppendChunk(nil, head), list)
	for _, ct := range []*rlwe.Ciphertext{sure, maybe} {
		var b []byte
		if ct != nil {
			if ct.Level() != sure.Level() {
				return fmt.Errorf("%w: the sure bits at level %d, the maybe bits at %d", errs.ErrInvalid, sure.Level(), ct.Level())
			}
			if b, err = ct.MarshalBinary(); err != nil {
				return err
			}
		}
		payload = envelope.AppendChunk(payload, b)
	}
	return envelope.WriteFile(out, s.Header(kindFoldResult), payload, 0o644)
}

// boolInt is 1 for true, 0 for false.
func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// FoldResult is a decrypted folding result: the listed eyes (indices in
// the query) and, for each, the sure and maybe bits of the fold pass, or
// the pair pass's bit in Sure (Maybe nil). Bits are close to 0 or 1; one
// farther from both lies in its comparator's band.
type FoldResult struct {
	Eyes        int // eyes of the query
	Pairs       bool
	Listed      []int
	Sure, Maybe []float64
}

// DecryptFold reads a folding database's encrypted result with the key
// holder h's keys.
func DecryptFold(h *iriskeys.Holder, path string) (*FoldResult, error) {
	bp := h.Params.Slots.Bootstrap.BootstrappingParameters
	b, err := envelope.ReadFile(path, h.Header(kindFoldResult))
	if err != nil {
		return nil, err
	}
	r, f, err := parseFoldResult(b, bp.MaxLevel())
	if err != nil {
		return nil, err
	}
	level, listed, groups := f.level, len(r.Listed), f.groups
	dec, decoder := rlwe.NewDecryptor(bp, h.Bootstrap), ckks.NewEncoder(bp)
	read := func(chunk []byte, what string) ([]float64, error) {
		ct, err := codec.DecodeCiphertext(chunk, bp, 1, level, what)
		if err != nil {
			return nil, err
		}
		vals := make([]float64, bp.MaxSlots())
		if err := decoder.Decode(dec.DecryptNew(ct), vals); err != nil {
			return nil, err
		}
		out := make([]float64, listed)
		for i := range out {
			out[i] = vals[foldmatch.ResultSlot(h.Params.Slots, i, groups)]
		}
		return out, nil
	}
	if r.Sure, err = read(f.sure, "sure bits"); err != nil {
		return nil, err
	}
	if !r.Pairs {
		if r.Maybe, err = read(f.maybe, "maybe bits"); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// checkEyeList refuses a list of eyes of a query of n eyes that is
// empty, not increasing, or names an eye outside [0, n).
func checkEyeList(eyes []int, n int) error {
	if len(eyes) == 0 {
		return fmt.Errorf("no eye listed")
	}
	for i, e := range eyes {
		if e < 0 || e >= n || (i > 0 && e <= eyes[i-1]) {
			return fmt.Errorf("eye %d at place %d of %v, for a query of %d eyes: the eyes must increase, each below %d", e, i, eyes, n, n)
		}
	}
	return nil
}

// foldFrame is what parseFoldResult reads besides the FoldResult: the
// ciphertexts' level, the fold groups per eye and the two ciphertexts'
// bytes (maybe empty for the pair pass).
type foldFrame struct {
	level, groups int
	sure, maybe   []byte
}

// parseFoldResult checks a fold result's payload (its header, the listed
// eyes: increasing, below the query's eyes, every eye for a fold pass)
// and returns it without the bits, which need the key holder's secret.
func parseFoldResult(b []byte, maxLevel int) (*FoldResult, *foldFrame, error) {
	parts, err := envelope.Chunks(b, 4, "fold result")
	if err != nil {
		return nil, nil, err
	}
	if len(parts[0]) != 20 {
		return nil, nil, fmt.Errorf("%w: fold result header of %d bytes", errs.ErrCorrupt, len(parts[0]))
	}
	u := func(i int) int { return int(binary.LittleEndian.Uint32(parts[0][4*i:])) }
	r := &FoldResult{Eyes: u(0), Pairs: u(2) == 1}
	f := &foldFrame{level: u(1), groups: u(4), sure: parts[2], maybe: parts[3]}
	listed := u(3)
	if r.Eyes < 1 || r.Eyes > MaxColumns || f.level > maxLevel || u(2) > 1 || listed < 1 || listed > r.Eyes || f.groups < 1 || f.groups > MaxColumns ||
		len(parts[1]) != 4*listed || (len(parts[3]) == 0) != r.Pairs {
		return nil, nil, fmt.Errorf("%w: fold result of %d eyes, %d listed, pass %d, at level %d", errs.ErrCorrupt, r.Eyes, listed, u(2), f.level)
	}
	for i := range listed {
		r.Listed = append(r.Listed, int(binary.LittleEndian.Uint32(parts[1][4*i:])))
	}
	if err := checkEyeList(r.Listed, r.Eyes); err != nil {
		return nil, nil, fmt.Errorf("%w: fold result: %v", errs.ErrCorrupt, err)
	}
	if !r.Pairs && listed != r.Eyes {
		return nil, nil, fmt.Errorf("%w: a fold pass over %d of %d eyes", errs.ErrCorrupt, listed, r.Eyes)
	}
	return r, f, nil
}

// framedParts splits a query or result payload into its n chunks, the
// first of which is two uint32 (little endian), returned as ints.
func framedParts(b []byte, n int, what string) ([][]byte, [2]int, error) {
	parts, err := envelope.Chunks(b, n, what)
	if err != nil {
		return nil, [2]int{}, err
	}
	if len(parts[0]) != 8 {
		return nil, [2]int{}, fmt.Errorf("%w: %s header of %d bytes", errs.ErrCorrupt, what, len(parts[0]))
	}
	return parts, [2]int{int(binary.LittleEndian.Uint32(parts[0])), int(binary.LittleEndian.Uint32(parts[0][4:]))}, nil
}
