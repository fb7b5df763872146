package ccmm

import (
	"fmt"
	"math/big"

	"encmatch/core/errs"

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

func (p *Params) checkEntries(m IntMat, bound int64, what string) error {
	if a := m.MaxAbs(); a > bound {
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
	return encryptSharedA(p.Query, sk.Query, len(p.Q)-1, m.Rows, m.Cols, intPlain(m, p.Q), new(big.Int).SetUint64(p.Delta))
}

// DB is the RGSW-style (MSRLWE-RGSW, papers/004 §6.1.1) encryption of a
// database matrix M (d1 x Inner) for CCMM against queries under the query
// secrets S_q: Enc = Enc_{S_db}(K*M) (A1: N_db x Inner, B1: d1 x Inner) and
// EncS = Enc_{S_db}(K*M*S_q) (A2: N_db x N_q, B2: d1 x N_q), both modulo
// Q*K.
type DB struct {
	Enc, EncS *SharedA
}

// EncryptDB encrypts a d1 x Inner database (d1 a multiple of N_db). It
// needs the query secrets: M*S_q is computed row by row in the ring, row i
// of block t contributing m_{i,t} * s_t(X^-1) (the negacyclic matrix of s_t
// applied from the left).
func (p *Params) EncryptDB(sk *Secrets, m IntMat) (*DB, error) {
	if m.Cols != p.Lit.Inner {
		return nil, fmt.Errorf("%w: database rows of %d entries, inner dimension is %d", errs.ErrInvalid, m.Cols, p.Lit.Inner)
	}
	if m.Rows != len(sk.DB)*p.NDB {
		return nil, fmt.Errorf("%w: database of %d rows, secrets for %d", errs.ErrInvalid, m.Rows, len(sk.DB)*p.NDB)
	}
	if err := p.checkEntries(m, p.Lit.MaxAbsDB, "database"); err != nil {
		return nil, err
	}
	all := append(append([]uint64(nil), p.Q...), p.K...)
	level := len(all) - 1
	K := p.ModulusK()
	enc, err := encryptSharedA(p.DB, sk.DB, level, m.Rows, m.Cols, intPlain(m, all), K)
	if err != nil {
		return nil, err
	}
	ms := p.MulSecret(sk.Query, m)
	encS, err := encryptSharedA(p.DB, sk.DB, level, m.Rows, p.NQ, func(i, r, c int) uint64 { return uint64(ms[i].Data[r*p.NQ+c]) }, K)
	if err != nil {
		return nil, err
	}
	return &DB{Enc: enc, EncS: encS}, nil
}

// MulSecret returns M*S_q (d1 x N_q) as residues in [0, q_i) modulo every
// prime of Q||K (a Mat per prime, entries stored uncentered).
func (p *Params) MulSecret(qkeys Keys, m IntMat) []Mat {
	r := p.Query.RingQ()
	n := p.NQ
	galInv := uint64(2*n - 1) // X -> X^-1
	sInv := make([]ring.Poly, len(qkeys))
	for t, k := range qkeys {
		sInv[t] = r.NewPoly()
		r.AutomorphismNTT(k.Value.Q, galInv, sInv[t])
	}
	out := make([]Mat, r.ModuliChainLength())
	for i := range out {
		out[i] = NewMat(m.Rows, n)
	}
	parallelRows(m.Rows, func(i0, i1 int) {
		row, acc, tmp := r.NewPoly(), r.NewPoly(), r.NewPoly()
		for i := i0; i < i1; i++ {
			acc.Zero()
			for t := range qkeys {
				for pi, q := range r.ModuliChain() {
					for k := 0; k < n; k++ {
						row.Coeffs[pi][k] = modInt(m.Data[i*m.Cols+t*n+k], q)
					}
				}
				r.NTT(row, tmp)
				r.MulCoeffsMontgomeryThenAdd(tmp, sInv[t], acc)
			}
			r.INTT(acc, tmp)
			for pi := range out {
				copy32(out[pi].Data[i*n:(i+1)*n], tmp.Coeffs[pi])
			}
		}
	})
	return out
}

func copy32(dst []int32, src []uint64) {
	for k := range dst {
		dst[k] = int32(src[k])
	}
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
	all := append(append([]uint64(nil), p.Q...), p.K...)
	if db == nil {
		return nil, fmt.Errorf("%w: database missing", errs.ErrInvalid)
	}
	if err := checkOperand(db.Enc, p.Lit.LogNDB, all, "database"); err != nil {
		return nil, err
	}
	if err := checkOperand(db.EncS, p.Lit.LogNDB, all, "database key part"); err != nil {
		return nil, err
	}
	if err := checkOperand(qry, p.Lit.LogNQ, p.Q, "query"); err != nil {
		return nil, err
	}
	if db.Enc.Cols != qry.Rows || db.EncS.Cols != p.NQ || db.EncS.Rows != db.Enc.Rows {
		return nil, fmt.Errorf("%w: database %dx%d (key part %dx%d), query %dx%d", errs.ErrInvalid, db.Enc.Rows, db.Enc.Cols, db.EncS.Rows, db.EncS.Cols, qry.Rows, qry.Cols)
	}
	if qry.Scale.Cmp(new(big.Int).SetUint64(p.Delta)) != 0 || db.Enc.Scale.Cmp(p.ModulusK()) != 0 || db.EncS.Scale.Cmp(p.ModulusK()) != 0 {
		return nil, fmt.Errorf("%w: scales: query %v (want Delta = %d), database %v and %v (want K = %v)", ErrModulus, qry.Scale, p.Delta, db.Enc.Scale, db.EncS.Scale, p.ModulusK())
	}
	bq, aq := p.extend(qry.B), p.extend(qry.A)
	out := &SharedA{LogN: p.Lit.LogNDB, Rows: db.Enc.Rows, Cols: qry.Cols, Moduli: all,
		Scale: new(big.Int).Mul(p.ModulusK(), new(big.Int).SetUint64(p.Delta))}
	for i, q := range all {
		bt, at := bq[i].Transpose(), aq[i].Transpose()
		ar := GEMM(db.Enc.A[i], bt, q)
		addMod(ar, GEMM(db.EncS.A[i], at, q), q)
		br := GEMM(db.Enc.B[i], bt, q)
		addMod(br, GEMM(db.EncS.B[i], at, q), q)
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
