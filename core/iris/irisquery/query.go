// Package irisquery holds an encrypted iris query's life (docs/IRIS.md,
// "Roles and files"): a querier's EncryptQuery (public key only), the
// server's LoadQuery and Match (the product against an irisdb database,
// then irismatch's pipeline), and the key holder's Decrypt of the result:
// one bit per eye.
package irisquery

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/big"
	"time"

	"encmatch/core/base/codec"
	"encmatch/core/base/envelope"
	"encmatch/core/base/errs"
	"encmatch/core/iris/ccmm"
	"encmatch/core/iris/irisdb"
	"encmatch/core/iris/iriskeys"
	"encmatch/core/iris/irismatch"

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
	q := &Query{Eyes: eyes, Rotations: rot}
	if q.Masks, err = irisdb.ReadWords(parts[1], eyes*rot*p.CCMM.Lit.Inner/64, "query masks"); err != nil {
		return nil, err
	}
	want := &ccmm.SharedA{LogN: p.CCMM.Lit.LogNQ, Rows: p.CCMM.Lit.Inner, Cols: eyes * rot, Moduli: p.CCMM.Q, Scale: new(big.Int).SetUint64(p.CCMM.Delta)}
	if q.Matrix, err = ccmm.ReadSharedA(bytes.NewReader(parts[2]), int64(len(parts[2])), want); err != nil {
		return nil, err
	}
	return q, nil
}

// Stats reports a Match: the stages' times and the pipeline's counts.
type Stats struct {
	Product time.Duration // encrypted matrix product (GEMMs and rescale)
	*irismatch.Stats
}

// Match runs the server s's encrypted matching of a query against a
// database and writes the encrypted result (one bit per eye) to out.
func Match(s *iriskeys.Server, db *irisdb.DB, q *Query, out string) (*Stats, error) {
	p := s.Params
	start := time.Now()
	src, closeFiles, err := irisdb.OpenMatrices(s, db)
	if err != nil {
		return nil, err
	}
	raw, err := p.CCMM.MultiplyRawFrom(src, db.Meta.Blocks, q.Matrix)
	closeFiles()
	if err != nil {
		return nil, err
	}
	res, err := p.CCMM.Rescale(raw)
	if err != nil {
		return nil, err
	}
	st := &Stats{Product: time.Since(start)}
	words := p.CCMM.Lit.Inner / 64
	rows := db.Meta.Blocks * p.CCMM.NDB
	ov := irisdb.Overlaps(db.Masks, q.Masks, rows, q.Eyes*q.Rotations, words)
	keys := *s.Keys
	keys.Blocks = db.Blocks
	pl, err := irismatch.NewPipeline(p.Slots, &keys, p.Kappa, db.Meta.Delta, q.Rotations)
	if err != nil {
		return nil, err
	}
	ct, pst, err := pl.Match(res, func(row, col int) int { return int(ov[row*q.Eyes*q.Rotations+col]) })
	if err != nil {
		return nil, err
	}
	st.Stats = pst
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
// none; values between 0 and 1 only for eyes inside the comparator's guard
// band).
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
