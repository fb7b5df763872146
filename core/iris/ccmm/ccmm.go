package ccmm

import (
	"bytes"
	"fmt"
	"io"
	"math/big"

	"encmatch/core/base/errs"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
)

// Secrets holds the key holder's secrets: DB[u] encrypts database rows
// [u*N_db, (u+1)*N_db), Query[t] encrypts query rows (code positions)
// [t*N_q, (t+1)*N_q). Query has Inner/N_q secrets.
type Secrets struct {
	DB, Query Keys
}

// GenSecrets generates the secrets for a database of dbRows rows (a
// multiple of N_db) with Lattigo's key generator.
func (p *Params) GenSecrets(dbRows int) (*Secrets, error) {
	if dbRows <= 0 || dbRows%p.NDB != 0 {
		return nil, fmt.Errorf("%w: database of %d rows: need a positive multiple of N_db = %d (pad with zero rows)", errs.ErrInvalid, dbRows, p.NDB)
	}
	return &Secrets{DB: GenKeys(p.DB, dbRows/p.NDB), Query: GenKeys(p.Query, p.Lit.Inner/p.NQ)}, nil
}

// SecretAs is database secret sk (ring N_db, NTT and Montgomery form) as
// a secret of params, a parameter set of the same ring over other moduli
// (the bootstrapping's residual ring, a fold's CKKS view): its
// coefficients, checked to be ternary, are extended from the database's
// first prime to params' Q and P with Lattigo's small-norm basis
// extension. A secret of DBShares parties' shares (their sum, which only
// tests form) may have coefficients up to DBShares.
func (p *Params) SecretAs(sk *rlwe.SecretKey, params rlwe.ParameterProvider) (*rlwe.SecretKey, error) {
	out := params.GetRLWEParameters()
	if sk.Value.Q.N() != p.DB.N() || out.N() != p.DB.N() {
		return nil, fmt.Errorf("%w: a secret of ring degree %d as one of ring degree %d, the database ring is %d",
			errs.ErrMismatch, sk.Value.Q.N(), out.N(), p.DB.N())
	}
	r := p.DB.RingQ().AtLevel(0)
	c := r.NewPoly()
	r.IMForm(sk.Value.Q, c)
	r.INTT(c, c)
	q := r.ModuliChain()[0]
	limit := uint64(max(1, p.Lit.DBShares))
	for k, v := range c.Coeffs[0] {
		if v > limit && v < q-limit {
			return nil, fmt.Errorf("%w: the database secret has a coefficient beyond +-%d (coefficient %d)", errs.ErrInvalid, limit, k)
		}
	}
	res := rlwe.NewSecretKey(out)
	rlwe.ExtendBasisSmallNormAndCenterNTTMontgomery(r, out.RingQ(), sk.Value.Q, c, res.Value.Q)
	if rp := out.RingP(); rp != nil {
		rlwe.ExtendBasisSmallNormAndCenterNTTMontgomery(r, rp, sk.Value.Q, c, res.Value.P)
	}
	return res, nil
}

func (p *Params) checkEntries(m Matrix, bound int64, what string) error {
	if a := maxAbs(m); a > bound {
		return fmt.Errorf("%w: %s has an entry of absolute value %d, parameters allow %d", errs.ErrInvalid, what, a, bound)
	}
	return nil
}

// EncryptQuery encrypts an Inner x d3 query matrix (one column per query
// vector) in shared-a format: ring N_q, modulus Q, scale Delta.
func (p *Params) EncryptQuery(sk *Secrets, m IntMat) (*SharedA, error) {
	if m.Rows != p.Lit.Inner {
		return nil, fmt.Errorf("%w: query of %d rows, inner dimension is %d", errs.ErrInvalid, m.Rows, p.Lit.Inner)
	}
	if err := p.checkEntries(m, p.Lit.MaxAbsQuery, "query"); err != nil {
		return nil, err
	}
	return encryptSharedA(p.Query, sk.Query, len(p.Q)-1, m.Rows, m.Cols, matrixPlain(m, p.Q, 0), new(big.Int).SetUint64(p.Delta), nil, 0)
}

// DB is the RGSW-style (MSRLWE-RGSW, papers/004 §6.1.1) encryption of a
// database matrix M (d1 x Inner) for CCMM against queries under the query
// secrets S_q: Enc = Enc_{S_db}(K*M) (A1: N_db x Inner, B1: d1 x Inner) and
// EncS = Enc_{S_db}(K*M*S_q) (A2: N_db x N_q, B2: d1 x N_q), both modulo
// Q*K.
type DB struct {
	Enc, EncS *SharedA
}

// checkDB checks a database matrix against the secrets and parameters.
func (p *Params) checkDB(sk *Secrets, m Matrix) error {
	rows, cols := m.Dims()
	if cols != p.Lit.Inner {
		return fmt.Errorf("%w: database rows of %d entries, inner dimension is %d", errs.ErrInvalid, cols, p.Lit.Inner)
	}
	if rows != len(sk.DB)*p.NDB {
		return fmt.Errorf("%w: database of %d rows, secrets for %d", errs.ErrInvalid, rows, len(sk.DB)*p.NDB)
	}
	return p.checkEntries(m, p.Lit.MaxAbsDB, "database")
}

// EncryptDB encrypts a d1 x Inner database (d1 a multiple of N_db) in
// memory (EncryptDBTo writes it to files a band at a time). It needs the
// query secrets: EncS encrypts M*S_q (MulSecret).
func (p *Params) EncryptDB(sk *Secrets, m Matrix) (*DB, error) {
	if err := p.checkDB(sk, m); err != nil {
		return nil, err
	}
	all := p.allPrimes()
	rows, _ := m.Dims()
	seeds, err := newSeeds(2)
	if err != nil {
		return nil, err
	}
	enc, err := encryptSharedA(p.DB, sk.DB, len(all)-1, rows, p.Lit.Inner, matrixPlain(m, all, 0), p.ModulusK(), seeds[0], 0)
	if err != nil {
		return nil, err
	}
	encS, err := encryptSharedA(p.DB, sk.DB, len(all)-1, rows, p.NQ, matrixPlain(p.MulSecret(sk.Query, m), all, 0), p.ModulusK(), seeds[1], 0)
	if err != nil {
		return nil, err
	}
	return &DB{Enc: enc, EncS: encS}, nil
}

// BandCols is the number of columns EncryptDBTo encrypts at once: 1,024
// residues are one 3 KiB row segment per write (4 KiB with primes of
// 2^24 or more).
const BandCols = 1024

// EncryptDBTo is EncryptDB for databases too large to hold encrypted in
// memory (7.25 GB of b-parts per 2^14 iris codes at the secure set): Enc and EncS are
// written to enc and encs in SharedA's binary form (WriteTo's bytes, at
// offset 0 of each), BandCols columns at a time. Memory holds the
// plaintext, M*S_q (int32) and one band of ciphertext (all rows, all
// primes).
func (p *Params) EncryptDBTo(sk *Secrets, m Matrix, enc, encs io.WriterAt) error {
	if err := p.checkDB(sk, m); err != nil {
		return err
	}
	all := p.allPrimes()
	rows, _ := m.Dims()
	ms := p.MulSecret(sk.Query, m)
	seeds, err := newSeeds(2)
	if err != nil {
		return err
	}
	for k, part := range []struct {
		out   io.WriterAt
		plain Matrix
		cols  int
	}{{enc, m, p.Lit.Inner}, {encs, ms, p.NQ}} {
		head := p.DBShape(rows, part.cols)
		head.Seed = seeds[k]
		var hb bytes.Buffer
		if err := head.writeHeader(&hb); err != nil {
			return err
		}
		if _, err := part.out.WriteAt(hb.Bytes(), 0); err != nil {
			return err
		}
		for j0 := 0; j0 < part.cols; j0 += BandCols {
			w := min(BandCols, part.cols-j0)
			band, err := encryptSharedA(p.DB, sk.DB, len(all)-1, rows, w, matrixPlain(part.plain, all, j0), p.ModulusK(), head.Seed, j0)
			if err != nil {
				return err
			}
			if err := head.writeBand(part.out, band, j0); err != nil {
				return err
			}
		}
	}
	return nil
}

// DBShape is the shape of a database matrix (Enc: cols = Inner, EncS:
// cols = N_q) of rows rows, without its matrices: the moduli Q||K, scale
// K, and a placeholder seed of SeedSize zero bytes (a key holder's
// database a-parts are seeded; the shape's seed only says so), or none
// for a database enrolled with public keys (DBShares > 0), whose a-parts
// are stored. Its EncodedSize is the file's.
func (p *Params) DBShape(rows, cols int) *SharedA {
	s := &SharedA{LogN: p.Lit.LogNDB, Rows: rows, Cols: cols, Moduli: p.allPrimes(), Scale: p.ModulusK()}
	if p.Lit.DBShares == 0 {
		s.Seed = make([]byte, SeedSize)
	}
	return s
}

// newSeeds returns k fresh seeds (NewSeed).
func newSeeds(k int) ([][]byte, error) {
	out := make([][]byte, k)
	for i := range out {
		var err error
		if out[i], err = NewSeed(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// allPrimes is Q||K.
func (p *Params) allPrimes() []uint64 { return append(append([]uint64(nil), p.Q...), p.K...) }

// MulSecret returns M*S_q (d1 x N_q) exactly: it is computed in the ring
// modulo the first two primes and the integers are recombined from their
// residues by CRT (|entries| <= Inner * MaxAbsDB, below 2^31 and half the
// two primes' product, checked by NewParams). Row i of block t contributes
// m_{i,t} * s_t(X^-1) (the negacyclic matrix of s_t applied from the
// left).
func (p *Params) MulSecret(qkeys Keys, m Matrix) Mat {
	r := p.Query.RingQ().AtLevel(1)
	n := p.NQ
	q0, q1 := r.ModuliChain()[0], r.ModuliChain()[1]
	inv := new(big.Int).ModInverse(new(big.Int).SetUint64(q0%q1), new(big.Int).SetUint64(q1)).Uint64() // q0^-1 mod q1
	galInv := uint64(2*n - 1)                                                                          // X -> X^-1
	sInv := make([]ring.Poly, len(qkeys))
	for t, k := range qkeys {
		sInv[t] = r.NewPoly()
		r.AutomorphismNTT(k.Value.Q, galInv, sInv[t])
	}
	rows, _ := m.Dims()
	out := NewMat(rows, n)
	parallelRows(rows, func(i0, i1 int) {
		row, acc, tmp := r.NewPoly(), r.NewPoly(), r.NewPoly()
		for i := i0; i < i1; i++ {
			acc.Zero()
			for t := range qkeys {
				for k := 0; k < n; k++ {
					v := m.At(i, t*n+k)
					row.Coeffs[0][k], row.Coeffs[1][k] = modInt(v, q0), modInt(v, q1)
				}
				r.NTT(row, tmp)
				r.MulCoeffsMontgomeryThenAdd(tmp, sInv[t], acc)
			}
			r.INTT(acc, tmp)
			for k := range n {
				// Garner: x = x0 + q0 h, x0 the centered residue mod q0,
				// h the centered (r1 - x0) / q0 mod q1.
				x0 := int64(center(tmp.Coeffs[0][k], q0))
				h := (tmp.Coeffs[1][k] + q1 - modInt(x0, q1)) % q1 * inv % q1
				out.Data[i*n+k] = int32(x0 + int64(q0)*int64(center(h, q1)))
			}
		}
	})
	return out
}

// checkOperand verifies ring degree and moduli of a ciphertext.
func checkOperand(ct *SharedA, logN int, moduli []uint64, what string) error {
	if ct == nil {
		return fmt.Errorf("%w: %s missing", errs.ErrInvalid, what)
	}
	if ct.LogN != logN {
		return fmt.Errorf("%w: %s of ring 2^%d, want 2^%d", errs.ErrMismatch, what, ct.LogN, logN)
	}
	if len(ct.Moduli) != len(moduli) || len(ct.A) != len(moduli) || len(ct.B) != len(moduli) {
		return fmt.Errorf("%w: %s has %d primes, the product needs %d", ErrModulus, what, len(ct.Moduli), len(moduli))
	}
	for i, q := range moduli {
		if ct.Moduli[i] != q {
			return fmt.Errorf("%w: %s prime %d is %d, the product needs %d", ErrModulus, what, i, ct.Moduli[i], q)
		}
	}
	return nil
}

// MulPlain is the ciphertext x plaintext matrix product (PCMM): ct (an
// encryption of M, Rows x Cols) times the plaintext U (Cols x n) is the
// encryption (A*U, B*U) of M*U under the same secrets, scale and moduli:
// two GEMMs per prime. msgBound bounds |M|; the product is refused
// (ErrPlainModulus) when Scale * msgBound * max_j sum_l |U_lj| does not fit
// below Q/2.
func MulPlain(ct *SharedA, u IntMat, msgBound int64) (*SharedA, error) {
	if ct.Cols != u.Rows {
		return nil, fmt.Errorf("%w: ciphertext %dx%d times plaintext %dx%d", errs.ErrInvalid, ct.Rows, ct.Cols, u.Rows, u.Cols)
	}
	colSum := int64(0)
	for j := 0; j < u.Cols; j++ {
		s := int64(0)
		for l := 0; l < u.Rows; l++ {
			s += max(u.At(l, j), -u.At(l, j))
		}
		colSum = max(colSum, s)
	}
	maxAbs := new(big.Int).Mul(big.NewInt(msgBound), big.NewInt(colSum))
	Q := prod(ct.Moduli)
	if !ct.Scale.IsUint64() {
		return nil, fmt.Errorf("%w: scale above 2^64", errs.ErrInvalid)
	}
	if err := checkPlain(Q, ct.Scale.Uint64(), maxAbs); err != nil {
		return nil, err
	}
	out := &SharedA{LogN: ct.LogN, Rows: ct.Rows, Cols: u.Cols, Moduli: ct.Moduli, Scale: ct.Scale}
	for i, q := range ct.Moduli {
		if err := gemmExact(u.Rows, q); err != nil {
			return nil, err
		}
		ut := residues(u, q).Transpose()
		out.A = append(out.A, GEMM(ct.A[i], ut, q))
		out.B = append(out.B, GEMM(ct.B[i], ut, q))
	}
	return out, nil
}

func gemmExact(inner int, q uint64) error {
	if h := new(big.Int).SetUint64(q / 2); new(big.Int).Mul(big.NewInt(int64(inner)), h.Mul(h, h)).BitLen() > 62 {
		return fmt.Errorf("%w: int64 GEMM of inner dimension %d is not exact modulo %d", ErrModulus, inner, q)
	}
	return nil
}

func residues(m IntMat, q uint64) Mat {
	r := NewMat(m.Rows, m.Cols)
	for i, v := range m.Data {
		r.Data[i] = center(modInt(v, q), q)
	}
	return r
}

// MultiplyRaw is the GEMM stage of the CCMM: the query (Inner x d3, modulo
// Q) is lifted exactly (centered) to Q*K with Lattigo's basis extender;
// then, for every prime of Q*K,
//
//	A_r = A1*B_q + A2*A_q,   B_r = B1*B_q + B2*A_q,
//
// four GEMMs. The result (d1 x d3, ring N_db) decrypts under the database
// secrets to K*Delta*M*M_q + K*M*E_q + E1*B_q + E2*A_q modulo Q*K.
func (p *Params) MultiplyRaw(db *DB, qry *SharedA) (*SharedA, error) {
	all := p.allPrimes()
	if db == nil {
		return nil, fmt.Errorf("%w: database missing", errs.ErrInvalid)
	}
	if err := checkOperand(db.Enc, p.Lit.LogNDB, all, "database"); err != nil {
		return nil, err
	}
	if err := checkOperand(db.EncS, p.Lit.LogNDB, all, "database key part"); err != nil {
		return nil, err
	}
	if db.Enc.Cols != p.Lit.Inner || db.EncS.Cols != p.NQ || db.EncS.Rows != db.Enc.Rows {
		return nil, fmt.Errorf("%w: database %dx%d (key part %dx%d), inner dimension %d", errs.ErrInvalid, db.Enc.Rows, db.Enc.Cols, db.EncS.Rows, db.EncS.Cols, p.Lit.Inner)
	}
	if db.Enc.Scale.Cmp(p.ModulusK()) != 0 || db.EncS.Scale.Cmp(p.ModulusK()) != 0 {
		return nil, fmt.Errorf("%w: database scales %v and %v, want K = %v", ErrModulus, db.Enc.Scale, db.EncS.Scale, p.ModulusK())
	}
	return p.multiplyBands(&memBlocks{db: db, n: p.NDB}, db.Enc.Rows/p.NDB, qry, p.NDB)
}

// DBBlocks yields a database (Enc and EncS, both d1 = blocks * N_db rows)
// in the order of SharedA's binary form: for each prime of Q||K, the
// a-parts (Enc.A, EncS.A, N_db rows each), then the rows 0, 1, ..., d1 - 1
// of the b-parts (Enc.B and EncS.B) in bands. Next(rows, ...) fills enc
// (rows x Inner) and encs (rows x N_q) with the next rows rows, or points
// them at its own memory; they are read before the next call. rows is
// N_db for the a-parts; a band of the b-parts lies within one block.
type DBBlocks interface {
	Next(rows int, enc, encs *Mat) error
}

// memBlocks yields an in-memory DB.
type memBlocks struct {
	db    *DB
	n     int
	prime int
	inB   bool // prime's a-parts were yielded
	row   int  // the next row of prime's b-parts
}

func (m *memBlocks) Next(rows int, enc, encs *Mat) error {
	if m.prime >= len(m.db.Enc.A) || rows <= 0 || !m.inB && rows != m.n || m.row+rows > m.db.Enc.Rows {
		return fmt.Errorf("%w: %d rows at row %d of prime %d of a database of %d rows", errs.ErrInvalid, rows, m.row, m.prime, m.db.Enc.Rows)
	}
	view := func(x Mat, r0 int) Mat {
		return Mat{Rows: rows, Cols: x.Cols, Data: x.Data[r0*x.Cols : (r0+rows)*x.Cols]}
	}
	if !m.inB {
		*enc, *encs = view(m.db.Enc.A[m.prime], 0), view(m.db.EncS.A[m.prime], 0)
		m.inB = true
		return nil
	}
	*enc, *encs = view(m.db.Enc.B[m.prime], m.row), view(m.db.EncS.B[m.prime], m.row)
	if m.row += rows; m.row == m.db.Enc.Rows {
		m.prime, m.inB, m.row = m.prime+1, false, 0
	}
	return nil
}

// ReadDB streams a database for MultiplyRawFrom from the binary forms of
// Enc and EncS (EncryptDBTo's files, their headers read by
// NewSharedAReader): it checks both headers against the parameters, then
// reads one block of each at a time into two reused buffers. It returns
// the number of blocks.
func (p *Params) ReadDB(enc, encs *SharedAReader) (DBBlocks, int, error) {
	rows := enc.Head.Rows
	for _, c := range []struct {
		h    *SharedA
		cols int
		what string
	}{{enc.Head, p.Lit.Inner, "database"}, {encs.Head, p.NQ, "database key part"}} {
		if err := c.h.matches(p.DBShape(rows, c.cols)); err != nil {
			return nil, 0, fmt.Errorf("%s: %w", c.what, err)
		}
	}
	return &streamBlocks{enc: enc, encs: encs, bufEnc: NewMat(p.NDB, p.Lit.Inner), bufEncS: NewMat(p.NDB, p.NQ)}, rows / p.NDB, nil
}

// streamBlocks yields a database from its two readers.
type streamBlocks struct {
	enc, encs       *SharedAReader
	bufEnc, bufEncS Mat // N_db rows each: an a-part or a band
}

func (s *streamBlocks) Next(rows int, enc, encs *Mat) error {
	if rows <= 0 || rows > s.bufEnc.Rows {
		return fmt.Errorf("%w: a band of %d rows, blocks of %d", errs.ErrInvalid, rows, s.bufEnc.Rows)
	}
	*enc = Mat{Rows: rows, Cols: s.bufEnc.Cols, Data: s.bufEnc.Data[:rows*s.bufEnc.Cols]}
	*encs = Mat{Rows: rows, Cols: s.bufEncS.Cols, Data: s.bufEncS.Data[:rows*s.bufEncS.Cols]}
	if err := s.enc.Next(enc); err != nil {
		return err
	}
	return s.encs.Next(encs)
}

// productBand is the number of database rows MultiplyRawFrom reads and
// multiplies at a time (at most N_db): a band of 1,024 rows is 48-64 MB
// of a 2^14-position database, so that the file's next band is read (by
// envelope.VerifyingPayload, ahead of its reader) while this one is
// multiplied.
const productBand = 1024

// MultiplyRawFrom is MultiplyRaw on a database of the given number of
// blocks read from src an a-part or a band of rows at a time (ReadDB
// streams one from its files: memory holds one block of residues, not the
// database).
func (p *Params) MultiplyRawFrom(src DBBlocks, blocks int, qry *SharedA) (*SharedA, error) {
	return p.multiplyBands(src, blocks, qry, min(productBand, p.NDB))
}

// multiplyBands is MultiplyRawFrom reading the b-parts band rows at a time
// (band divides N_db).
func (p *Params) multiplyBands(src DBBlocks, blocks int, qry *SharedA, band int) (*SharedA, error) {
	all := p.allPrimes()
	if err := checkOperand(qry, p.Lit.LogNQ, p.Q, "query"); err != nil {
		return nil, err
	}
	if qry.Rows != p.Lit.Inner || blocks < 1 {
		return nil, fmt.Errorf("%w: a query of %d rows (inner dimension %d) against %d database blocks", errs.ErrInvalid, qry.Rows, p.Lit.Inner, blocks)
	}
	if qry.Scale.Cmp(new(big.Int).SetUint64(p.Delta)) != 0 {
		return nil, fmt.Errorf("%w: query scale %v, want Delta = %d", ErrModulus, qry.Scale, p.Delta)
	}
	bq, aq := p.extend(qry.B), p.extend(qry.A)
	n := p.NDB
	out := &SharedA{LogN: p.Lit.LogNDB, Rows: blocks * n, Cols: qry.Cols, Moduli: all,
		Scale: new(big.Int).Mul(p.ModulusK(), new(big.Int).SetUint64(p.Delta))}
	if band < 1 || n%band != 0 {
		return nil, fmt.Errorf("%w: bands of %d rows in blocks of %d", errs.ErrInvalid, band, n)
	}
	var enc, encs Mat
	for i, q := range all {
		// enc: rows x Inner times Inner x d3; encs: rows x N_q times N_q x d3.
		bt, at := newRight(bq[i].Transpose(), q), newRight(aq[i].Transpose(), q)
		product := func(rows int) (Mat, error) {
			if err := src.Next(rows, &enc, &encs); err != nil {
				return Mat{}, err
			}
			if enc.Rows != rows || enc.Cols != p.Lit.Inner || encs.Rows != rows || encs.Cols != p.NQ {
				return Mat{}, fmt.Errorf("%w: database rows of %dx%d and %dx%d, want %dx%d and %dx%d", errs.ErrInvalid, enc.Rows, enc.Cols, encs.Rows, encs.Cols, rows, p.Lit.Inner, rows, p.NQ)
			}
			r := bt.mul(enc)
			addMod(r, at.mul(encs), q)
			return r, nil
		}
		ar, err := product(n)
		if err != nil {
			return nil, err
		}
		br := NewMat(blocks*n, qry.Cols)
		for r0 := 0; r0 < blocks*n; r0 += band {
			bt, err := product(band)
			if err != nil {
				return nil, err
			}
			copy(br.Data[r0*qry.Cols:], bt.Data)
		}
		out.A, out.B = append(out.A, ar), append(out.B, br)
	}
	return out, nil
}

// extend lifts residue matrices modulo Q (rows a multiple of N_q) to Q||K:
// the centered representative in (-Q/2, Q/2] of every entry, reduced modulo
// each prime of K, column block by column block with Lattigo's exact
// ModUpQtoP.
func (p *Params) extend(ms []Mat) []Mat {
	n := p.NQ
	rQ, err := ring.NewRing(n, p.Q)
	if err != nil {
		panic(err) // validated by NewParams
	}
	rK, err := ring.NewRing(n, p.K)
	if err != nil {
		panic(err)
	}
	be := ring.NewBasisExtender(rQ, rK)
	rows, cols := ms[0].Rows, ms[0].Cols
	out := append([]Mat(nil), ms...)
	for range p.K {
		out = append(out, NewMat(rows, cols))
	}
	pq, pk := newPolys(rQ, tile), newPolys(rK, tile)
	for j0 := 0; j0 < cols; j0 += tile {
		nc := min(tile, cols-j0)
		for r0 := 0; r0 < rows; r0 += n {
			getCols(ms, p.Q, pq[:nc], r0, j0)
			for c := 0; c < nc; c++ {
				be.ModUpQtoP(rQ.Level(), rK.Level(), pq[c], pk[c])
				rK.Reduce(pk[c], pk[c])
			}
			putCols(out[len(p.Q):], p.K, pk[:nc], r0, j0)
		}
	}
	return out
}

// Rescale divides a raw CCMM result by K with rounding (Lattigo's
// DivRoundByLastModulusMany drops the primes of K): the result is modulo
// Q with scale Delta.
func (p *Params) Rescale(raw *SharedA) (*SharedA, error) {
	all := append(append([]uint64(nil), p.Q...), p.K...)
	if err := checkOperand(raw, p.Lit.LogNDB, all, "raw product"); err != nil {
		return nil, err
	}
	r := p.DB.RingQ()
	n := p.NDB
	out := &SharedA{LogN: raw.LogN, Rows: raw.Rows, Cols: raw.Cols, Moduli: append([]uint64(nil), p.Q...),
		Scale: new(big.Int).Quo(raw.Scale, p.ModulusK())}
	for range p.Q {
		out.A = append(out.A, NewMat(n, raw.Cols))
		out.B = append(out.B, NewMat(raw.Rows, raw.Cols))
	}
	rOut := r.AtLevel(len(p.Q) - 1)
	pin, buf, pout := newPolys(r, tile), r.NewPoly(), newPolys(rOut, tile)
	do := func(src []Mat, dst []Mat, r0, j0, nc int) {
		getCols(src, all, pin[:nc], r0, j0)
		for c := 0; c < nc; c++ {
			r.DivRoundByLastModulusMany(len(p.K), pin[c], buf, pout[c])
		}
		putCols(dst, p.Q, pout[:nc], r0, j0)
	}
	for j0 := 0; j0 < raw.Cols; j0 += tile {
		nc := min(tile, raw.Cols-j0)
		do(raw.A, out.A, 0, j0, nc)
		for r0 := 0; r0 < raw.Rows; r0 += n {
			do(raw.B, out.B, r0, j0, nc)
		}
	}
	return out, nil
}

// Multiply is the ciphertext x ciphertext matrix product: MultiplyRaw then
// Rescale. The result (d1 x d3, ring N_db, modulo Q, scale Delta) decrypts
// under the database secrets to M*M_q.
func (p *Params) Multiply(db *DB, qry *SharedA) (*SharedA, error) {
	raw, err := p.MultiplyRaw(db, qry)
	if err != nil {
		return nil, err
	}
	return p.Rescale(raw)
}
