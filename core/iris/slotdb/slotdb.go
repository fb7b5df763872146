// Package slotdb encodes database blocks so that the encrypted matrix
// product (package ccmm) leaves its scores in the CKKS slots of ring N_db
// instead of its coefficients: the first step of papers/004's Algorithm 2
// (docs/IRIS.md, "Scores in slots"), where a polynomial runs on every
// score before any bootstrap.
//
// A CCMM result column j of block t decrypts to the coefficients
// y_i = sum_l M_il q_lj of a polynomial of ring N_db (M: the block's N_db
// rows, q_j: query column j). The product is linear in M, so the enroller
// may replace M by round(c L M), L the inverse of the CKKS slot encoding
// of ring N_db (Lattigo's encoder, applied to every column of the block):
// then y / c decodes, slot by slot, to the scores. Slot k holds the score
// of code k in its real part and that of code k + N_db/2 in its
// imaginary part, so a block keeps its N_db rows and the database its
// size. The rounding to integers is the only error this adds: slot k's
// parts are off by sum_i (sum_l r_il q_lj) zeta_k^i / c with |r_il| <=
// 1/2, a standard deviation of at most sqrt(N_db ||q_j||^2 / 24) / c per
// part (ErrorBound, measured in the tests).
//
// Everything CKKS here is Lattigo's (the encoder's FFT and rounding, its
// decoder); this package chooses the layout and keeps the bounds.
package slotdb

import (
	"fmt"
	"math"

	"encmatch/core/base/errs"
	"encmatch/core/base/parallel"
	"encmatch/core/iris/ccmm"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// Tail is the number of standard deviations ErrorBound allows (the
// heuristic central-limit bound package ccmm uses for its noise).
const Tail = 8

// Encoder encodes database blocks of ring degree N for slot scores at an
// enrollment scale c = 2^LogScale.
type Encoder struct {
	LogN, LogScale int
	params         ckks.Parameters // ring N, one 60-bit prime: room for every encoded entry
}

// NewEncoder makes the encoder of blocks of 2^logN codes at scale
// 2^logScale (1 <= logScale <= 40).
func NewEncoder(logN, logScale int) (*Encoder, error) {
	if logN < 2 || logN > 17 {
		return nil, fmt.Errorf("%w: database ring 2^%d (want 2^2 to 2^17)", errs.ErrInvalid, logN)
	}
	if logScale < 1 || logScale > 40 {
		return nil, fmt.Errorf("%w: enrollment scale 2^%d (want 2^1 to 2^40)", errs.ErrInvalid, logScale)
	}
	params, err := ckks.NewParametersFromLiteral(ckks.ParametersLiteral{
		LogN: logN, LogQ: []int{60}, Xs: ring.Ternary{P: 2.0 / 3}, LogDefaultScale: logScale,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: encoding ring: %v", errs.ErrInvalid, err)
	}
	return &Encoder{LogN: logN, LogScale: logScale, params: params}, nil
}

// N is the block size: the database ring degree.
func (e *Encoder) N() int { return 1 << e.LogN }

// maxEntry bounds what an encoded entry may reach before the 61-bit
// encoding prime could wrap it.
const maxEntry = 1 << 57

// Encode returns the encoded database: every block of N rows of db
// (rows a multiple of N) replaced by the N rows whose column l holds
// round(c x) for x the coefficients of the polynomial with slot k =
// db[k][l] + i db[k + N/2][l] (rows within the block). Columns are
// encoded in parallel.
func (e *Encoder) Encode(db ccmm.IntMat) (ccmm.IntMat, error) {
	n := e.N()
	if db.Rows <= 0 || db.Rows%n != 0 || db.Cols <= 0 || len(db.Data) != db.Rows*db.Cols {
		return ccmm.IntMat{}, fmt.Errorf("%w: a %dx%d database: rows must be a positive multiple of the block size %d", errs.ErrInvalid, db.Rows, db.Cols, n)
	}
	// A coefficient is at most the largest slot's modulus: c sqrt(2) |db|.
	if float64(db.MaxAbs())*math.Sqrt2*math.Ldexp(1, e.LogScale) >= maxEntry {
		return ccmm.IntMat{}, fmt.Errorf("%w: entries up to %d at scale 2^%d overflow the encoding (2^57)", errs.ErrInvalid, db.MaxAbs(), e.LogScale)
	}
	out := ccmm.NewIntMat(db.Rows, db.Cols)
	blocks, half := db.Rows/n, n/2
	jobs := blocks * db.Cols
	workers := min(parallel.Workers(), jobs)
	err := parallel.For(workers, func(w int) error {
		enc := ckks.NewEncoder(e.params)
		pt := ckks.NewPlaintext(e.params, 0)
		pt.IsNTT = false
		slots := make([]complex128, half)
		q := e.params.Q()[0]
		for job := w; job < jobs; job += workers {
			t, l := job/db.Cols, job%db.Cols
			base := t * n
			for k := range slots {
				slots[k] = complex(float64(db.At(base+k, l)), float64(db.At(base+k+half, l)))
			}
			if err := enc.Encode(slots, pt); err != nil {
				return fmt.Errorf("encoding column %d of block %d: %w", l, t, err)
			}
			for i, v := range pt.Value.Coeffs[0] {
				x := int64(v)
				if v > q/2 {
					x = -int64(q - v)
				}
				out.Data[(base+i)*db.Cols+l] = x
			}
		}
		return nil
	})
	if err != nil {
		return ccmm.IntMat{}, err
	}
	return out, nil
}

// Scores is the plaintext model of the decryption side: y holds the N
// exact coefficients of one result column of one block (the product of
// the encoded block by a query column); it returns the N scores the slots
// decode to, code k at index k (the real part of slot k for k < N/2, the
// imaginary part of slot k - N/2 otherwise).
func (e *Encoder) Scores(y []int64) ([]float64, error) {
	n := e.N()
	if len(y) != n {
		return nil, fmt.Errorf("%w: %d coefficients for a ring of degree %d", errs.ErrInvalid, len(y), n)
	}
	q := e.params.Q()[0]
	pt := ckks.NewPlaintext(e.params, 0)
	pt.IsNTT = false
	for i, v := range y {
		if v >= maxEntry || v <= -maxEntry {
			return nil, fmt.Errorf("%w: coefficient %d out of range", errs.ErrInvalid, v)
		}
		if v < 0 {
			pt.Value.Coeffs[0][i] = q - uint64(-v)
		} else {
			pt.Value.Coeffs[0][i] = uint64(v)
		}
	}
	slots := make([]complex128, n/2)
	if err := ckks.NewEncoder(e.params).Decode(pt, slots); err != nil {
		return nil, err
	}
	return Unpack(slots), nil
}

// Unpack lays decoded slots out by code: slot k's real part is code k,
// its imaginary part code k + len(slots).
func Unpack(slots []complex128) []float64 {
	out := make([]float64, 2*len(slots))
	for k, z := range slots {
		out[k], out[k+len(slots)] = real(z), imag(z)
	}
	return out
}

// ErrorBound is the bound (Tail standard deviations) on how far a decoded
// score may lie from the exact one because of the encoding's rounding,
// for a query column of squared norm norm2 (sum of its squared entries).
func (e *Encoder) ErrorBound(norm2 float64) float64 {
	return Tail * math.Sqrt(float64(e.N())*norm2/24) / math.Ldexp(1, e.LogScale)
}

// NoiseBound is the bound (the CCMM's Tail standard deviations) on how far
// the product's noise moves a decoded score: a slot's part sums N
// coefficients' noise times unit-modulus roots, so it is at most
// sqrt(N/2) ResultBound in standard deviations, in units of Delta c.
func (e *Encoder) NoiseBound(cp *ccmm.Params) float64 {
	return math.Sqrt(float64(e.N())/2) * cp.ResultBound() / float64(cp.Delta) / math.Ldexp(1, e.LogScale)
}

// CKKSParameters are Lattigo CKKS parameters of the database ring over
// the CCMM's result modulus Q, with special primes of logP bits (for the
// keys of computations on the scores; none for decryption only) and the
// default scale 2^logScale those computations run at. A result column
// framed by Column is a ciphertext of these parameters whose slots hold
// scores (Unpack's layout); ccmm.Params.SecretAs gives the database secret in them.
func (e *Encoder) CKKSParameters(cp *ccmm.Params, logP []int, logScale int) (ckks.Parameters, error) {
	if cp.Lit.LogNDB != e.LogN {
		return ckks.Parameters{}, fmt.Errorf("%w: blocks of 2^%d codes, the CCMM's database ring is 2^%d", errs.ErrMismatch, e.LogN, cp.Lit.LogNDB)
	}
	p, err := ckks.NewParametersFromLiteral(ckks.ParametersLiteral{
		LogN: e.LogN, Q: cp.Q, LogP: logP, Xs: ring.Ternary{P: 2.0 / 3}, LogDefaultScale: logScale,
	})
	if err != nil {
		return ckks.Parameters{}, fmt.Errorf("%w: CKKS parameters over Q: %v", errs.ErrInvalid, err)
	}
	return p, nil
}

// ColumnScale is the scale of a framed result column: the CCMM's Delta
// times the enrollment scale c.
func (e *Encoder) ColumnScale(cp *ccmm.Params) rlwe.Scale {
	return rlwe.NewScale(math.Ldexp(float64(cp.Delta), e.LogScale))
}

// Column frames column j of block t of a rescaled CCMM result (modulo Q,
// scale Delta) as a ciphertext of params (CKKSParameters): (b_{t,j}, a_j)
// in NTT form at ColumnScale, so that it decrypts and decodes to the
// column's scores in Unpack's layout.
func (e *Encoder) Column(params ckks.Parameters, cp *ccmm.Params, res *ccmm.SharedA, t, j int) (*rlwe.Ciphertext, error) {
	n := params.N()
	if res.LogN != params.LogN() || res.Rows%n != 0 || t < 0 || t >= res.Rows/n || j < 0 || j >= res.Cols {
		return nil, fmt.Errorf("%w: block %d, column %d of a %dx%d result in ring 2^%d", errs.ErrInvalid, t, j, res.Rows, res.Cols, res.LogN)
	}
	if len(res.Moduli) != len(cp.Q) || len(params.Q()) != len(cp.Q) {
		return nil, fmt.Errorf("%w: the result has %d primes, Q has %d (rescale the CCMM first)", errs.ErrMismatch, len(res.Moduli), len(cp.Q))
	}
	for i, q := range params.Q() {
		if res.Moduli[i] != q {
			return nil, fmt.Errorf("%w: the result's primes %v are not Q's %v", errs.ErrMismatch, res.Moduli, params.Q())
		}
	}
	ct := ckks.NewCiphertext(params, 1, params.MaxLevel())
	r := params.RingQ()
	for i, q := range params.Q() {
		b, a := res.B[i], res.A[i]
		for k := 0; k < n; k++ {
			ct.Value[0].Coeffs[i][k] = ccmm.Uncenter(b.Data[(t*n+k)*res.Cols+j], q)
			ct.Value[1].Coeffs[i][k] = ccmm.Uncenter(a.Data[k*res.Cols+j], q)
		}
	}
	r.NTT(ct.Value[0], ct.Value[0])
	r.NTT(ct.Value[1], ct.Value[1])
	ct.Scale = e.ColumnScale(cp)
	return ct, nil
}
