package irisquery

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"math/big"

	"encmatch/core/base/envelope"
	"encmatch/core/base/errs"
	"encmatch/core/iris/ccmm"
	"encmatch/core/iris/irisdb"
	"encmatch/core/iris/iriskeys"
)

// A kept product (frame "iris-product") is the query's digest and the
// database's matrices digest (32 bytes each), then the rescaled product
// of every column of the query in ccmm's binary form.
const kindProduct = "iris-product"

// product returns the rescaled encrypted product that Match's pass needs
// and the query it belongs to: the columns of the listed eyes for a pair
// pass (and the query restricted to them), every column otherwise. A pair
// pass with pass.Product reads the product the fold pass kept there; a
// fold pass with pass.Product multiplies and keeps its product there.
func product(s *iriskeys.Server, db *irisdb.DB, q *Query, pass Pass) (*ccmm.SharedA, *Query, error) {
	p := s.Params
	if pass.readsProduct() {
		all, err := readProduct(s, db, q, pass.Product)
		if err != nil {
			return nil, nil, err
		}
		res, err := all.Columns(q.columns(pass.PairEyes))
		if err != nil {
			return nil, nil, err
		}
		lq, err := q.listed(pass.PairEyes)
		return res, lq, err
	}
	if pass.PairEyes != nil {
		var err error
		if q, err = q.listed(pass.PairEyes); err != nil {
			return nil, nil, err
		}
	}
	src, verify, closeFiles, err := irisdb.OpenMatrices(s, db)
	if err != nil {
		return nil, nil, err
	}
	raw, err := p.CCMM.MultiplyRawFrom(src, db.Meta.Blocks, q.Matrix)
	if err == nil {
		err = verify() // before anything uses the product
	}
	closeFiles()
	if err != nil {
		return nil, nil, err
	}
	res, err := p.CCMM.Rescale(raw)
	if err != nil {
		return nil, nil, err
	}
	if pass.Product != "" {
		if err := writeProduct(s, db, q, res, pass.Product); err != nil {
			return nil, nil, fmt.Errorf("keeping the product: %w", err)
		}
	}
	return res, q, nil
}

// productBinding is what a kept product is bound to: the query's digest,
// then the database matrices'.
func productBinding(db *irisdb.DB, q *Query) []byte {
	return append(append([]byte(nil), q.Digest[:]...), db.MatricesDigest[:]...)
}

// writeProduct keeps the rescaled product res of query q against db in
// path (atomically, streamed: 130 MB for four eyes of 31 rotations
// against 2^14 codes at the fold preset).
func writeProduct(s *iriskeys.Server, db *irisdb.DB, q *Query, res *ccmm.SharedA, path string) error {
	bind := productBinding(db, q)
	return envelope.WriteFileStream(path, s.Header(kindProduct), int64(len(bind))+res.EncodedSize(), 0o600, func(w io.Writer) error {
		if _, err := w.Write(bind); err != nil {
			return err
		}
		_, err := res.WriteTo(w)
		return err
	})
}

// readProduct reads the product a fold pass of query q against db kept
// in path: it must be bound to q and db (ErrMismatch otherwise) and have
// the product's shape (every column of q, every row of db, the primes of
// Q at scale Delta).
func readProduct(s *iriskeys.Server, db *irisdb.DB, q *Query, path string) (*ccmm.SharedA, error) {
	p := s.Params
	want := &ccmm.SharedA{LogN: p.CCMM.Lit.LogNDB, Rows: db.Meta.Blocks * p.CCMM.NDB, Cols: q.Eyes * q.Rotations,
		Moduli: p.CCMM.Q, Scale: new(big.Int).SetUint64(p.CCMM.Delta)}
	bind := productBinding(db, q)
	var res *ccmm.SharedA
	err := envelope.ReadFileStream(path, s.Header(kindProduct), func(r io.Reader, n int64) error {
		got := make([]byte, len(bind))
		if _, err := io.ReadFull(r, got); err != nil {
			return fmt.Errorf("%w: %v", errs.ErrCorrupt, err)
		}
		switch {
		case !bytes.Equal(got[:sha256.Size], bind[:sha256.Size]):
			return fmt.Errorf("%w: the kept product is another query's (run the fold pass of this query with this product file)", errs.ErrMismatch)
		case !bytes.Equal(got[sha256.Size:], bind[sha256.Size:]):
			return fmt.Errorf("%w: the kept product is of another database, or of this one before it changed", errs.ErrMismatch)
		}
		var err error
		res, err = ccmm.ReadSharedA(r, n-int64(len(bind)), want)
		return err
	})
	return res, err
}
