// Package ccmmtest holds the fixtures that the tests of the packages after
// the encrypted matrix product (scoreslots, irismatch) share: iris-like
// code matrices and an encrypted product of them by a public-key query.
package ccmmtest

import (
	"math/rand/v2"
	"testing"

	"encmatch/core/iris/ccmm"
)

// Codes draws a rows x cols matrix of iris-like entries: 80 % in {-1, 1},
// the rest 0 (masked).
func Codes(rng *rand.Rand, rows, cols int) ccmm.IntMat {
	m := ccmm.NewIntMat(rows, cols)
	for i := range m.Data {
		if rng.Float64() < 0.8 {
			m.Data[i] = 1 - 2*int64(rng.IntN(2))
		}
	}
	return m
}

// Product encrypts db (rows a multiple of N_db) under fresh database
// secrets and q under the query public key, and returns the secrets and
// the rescaled encrypted product db * q (modulo Q, scale Delta).
func Product(tb testing.TB, cp *ccmm.Params, db, q ccmm.IntMat) (*ccmm.Secrets, *ccmm.SharedA) {
	tb.Helper()
	sk, err := cp.GenSecrets(db.Rows)
	if err != nil {
		tb.Fatal(err)
	}
	pk, err := cp.GenQueryPublicKey(sk)
	if err != nil {
		tb.Fatal(err)
	}
	qct, err := cp.EncryptQueryPK(pk, q)
	if err != nil {
		tb.Fatal(err)
	}
	edb, err := cp.EncryptDB(sk, db)
	if err != nil {
		tb.Fatal(err)
	}
	res, err := cp.Multiply(edb, qct)
	if err != nil {
		tb.Fatal(err)
	}
	return sk, res
}

// Plant writes into column col of q the code of row row of db, with the
// first `flip` of its unmasked positions negated (a pair at fractional
// Hamming distance flip / |mask|).
func Plant(db, q ccmm.IntMat, row, col, flip int) {
	for l := 0; l < db.Cols; l++ {
		v := db.At(row, l)
		if v != 0 && flip > 0 {
			v, flip = -v, flip-1
		}
		q.Data[l*q.Cols+col] = v
	}
}

// Overlap returns |m_row and m_col|, the positions unmasked in both row
// row of db and column col of q.
func Overlap(db, q ccmm.IntMat) func(row, col int) int {
	return func(row, col int) int {
		c := 0
		for l := 0; l < db.Cols; l++ {
			if db.At(row, l) != 0 && q.At(l, col) != 0 {
				c++
			}
		}
		return c
	}
}
