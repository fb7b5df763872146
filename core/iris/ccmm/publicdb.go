package ccmm

import (
	"bytes"
	"fmt"
	"io"
	"math"

	"encmatch/core/base/errs"

	"github.com/tuneinsight/lattigo/v6/ring"
)

// A database enrolled with public keys only (issue 34; docs/IRIS.md,
// "Enrollment without a key holder"). Nobody holds the database secrets
// S_db or the query secrets S_q: each is a sum of parties' shares. The
// enroller encrypts Enc = Enc(K M) with the database blocks' public key
// (EncryptDBPK). EncS = Enc(K M S_q) needs S_q on the right of M, which no
// public key can supply; each holder i of a share S_q,i instead returns
//
//	(A1 S_q,i + A0_i,  B1 S_q,i + B0_i)      (EncSShare)
//
// with (A0_i, B0_i) its own public-key encryption of zero under S_db, and
// the sum over the holders (CombineEncS) is an encryption of K M S_q under
// S_db with noise E2 = E1 S_q + sum_i E0_i. The encryption of zero hides
// S_q,i (without it, A1 S_q,i and the public A1 would give S_q,i away by
// linear algebra); the contribution is then a ciphertext under S_db, which
// no fewer than the decryption threshold can open, so it needs no
// flooding. Both matrices' a-parts are public-key encryptions, not
// seeded: they are stored.

// EncryptDBPK encrypts a d1 x Inner database (d1 a multiple of N_db) as
// Enc = Enc_{S_db}(K M) modulo Q*K with the database blocks' public key
// pk (one b per block), as EncryptQueryPK encrypts a query: one ternary
// u_j per column, shared by the blocks.
func (p *Params) EncryptDBPK(pk *PublicKey, m Matrix) (*SharedA, error) {
	if err := p.checkPublicDB(m); err != nil {
		return nil, err
	}
	rows, cols := m.Dims()
	all := p.allPrimes()
	return encryptPK(p.DB, len(all)-1, pk, rows, cols, matrixPlain(m, all, 0), p.ModulusK(), "database")
}

// checkPublicDB checks a database matrix for EncryptDBPK: parameters made
// for it (DBShares > 0), Inner columns, whole blocks of rows, entries
// within MaxAbsDB.
func (p *Params) checkPublicDB(m Matrix) error {
	if p.Lit.DBShares == 0 {
		return fmt.Errorf("%w: parameters for one key holder's database (DBShares 0): their noise bounds do not cover a public-key enrollment", errs.ErrInvalid)
	}
	rows, cols := m.Dims()
	if cols != p.Lit.Inner {
		return fmt.Errorf("%w: database rows of %d entries, inner dimension is %d", errs.ErrInvalid, cols, p.Lit.Inner)
	}
	if rows <= 0 || rows%p.NDB != 0 {
		return fmt.Errorf("%w: database of %d rows: need a positive multiple of N_db = %d (pad with zero rows)", errs.ErrInvalid, rows, p.NDB)
	}
	return p.checkEntries(m, p.Lit.MaxAbsDB, "database")
}

// EncryptDBPKTo is EncryptDBPK written to enc in SharedA's binary form
// (at offset 0), BandCols columns at a time: memory holds one band of
// ciphertext (all rows, all primes), not the whole matrix.
func (p *Params) EncryptDBPKTo(pk *PublicKey, m Matrix, enc io.WriterAt) error {
	if err := p.checkPublicDB(m); err != nil {
		return err
	}
	rows, cols := m.Dims()
	all := p.allPrimes()
	head := p.DBShape(rows, cols)
	var hb bytes.Buffer
	if err := head.writeHeader(&hb); err != nil {
		return err
	}
	if _, err := enc.WriteAt(hb.Bytes(), 0); err != nil {
		return err
	}
	for j0 := 0; j0 < cols; j0 += BandCols {
		w := min(BandCols, cols-j0)
		band, err := encryptPK(p.DB, len(all)-1, pk, rows, w, matrixPlain(m, all, j0), p.ModulusK(), "database")
		if err != nil {
			return err
		}
		if err := head.writeBand(enc, band, j0); err != nil {
			return err
		}
	}
	return nil
}

// EncSShare is one query-share holder's contribution to EncS: Enc times
// its shares of the query secrets (one per block of N_q positions, in the
// query ring over Q*K, as collective.NewQueryShares draws them),
// re-randomised by a fresh public-key encryption of zero under the
// database blocks' key pk. EncSShareFrom computes it from Enc's file.
func (p *Params) EncSShare(pk *PublicKey, enc *SharedA, shares Keys) (*SharedA, error) {
	r, err := newMemReader(enc, "Enc")
	if err != nil {
		return nil, err
	}
	return p.encSShare(pk, r, shares)
}

// secretsInv returns s_t(X^-1) of each secret (NTT and Montgomery form,
// in the query ring over Q*K): the right factors of M S_q, row by row.
func (p *Params) secretsInv(secrets Keys) []ring.Poly {
	r := p.Query.RingQ().AtLevel(len(p.allPrimes()) - 1)
	galInv := uint64(2*p.NQ - 1) // X -> X^-1
	sInv := make([]ring.Poly, len(secrets))
	for t, k := range secrets {
		sInv[t] = r.NewPoly()
		r.AutomorphismNTT(k.Value.Q, galInv, sInv[t])
	}
	return sInv
}

// addMulSecretPrime adds x S to out modulo prime l of Q*K, for the rows
// of x (Inner columns) and as many rows of out (N_q columns): row i's
// block t of N_q entries, as a polynomial, times s_t(X^-1) in the query
// ring (MulSecret's product, on residues).
func (p *Params) addMulSecretPrime(l int, sInv []ring.Poly, x, out Mat) {
	sub := p.Query.RingQ().SubRings[l]
	q, n := sub.Modulus, p.NQ
	parallelRows(x.Rows, func(i0, i1 int) {
		row, acc := make([]uint64, n), make([]uint64, n)
		for i := i0; i < i1; i++ {
			clear(acc)
			for t := range sInv {
				for k, v := range x.Data[i*x.Cols+t*n : i*x.Cols+(t+1)*n] {
					row[k] = Uncenter(v, q)
				}
				sub.NTT(row, row)
				sub.MulCoeffsMontgomeryThenAdd(row, sInv[t].Coeffs[l], acc)
			}
			sub.INTT(acc, acc)
			dst := out.Data[i*n : (i+1)*n]
			for k := range dst {
				dst[k] = center((acc[k]+Uncenter(dst[k], q))%q, q)
			}
		}
	})
}

// EncSShareFrom is EncSShare reading Enc from its binary form (a
// SharedAReader on EncryptDBPKTo's file, header already read) a band of
// rows of one prime at a time: memory holds the contribution and one band
// of Enc (encSBand rows), not Enc.
func (p *Params) EncSShareFrom(pk *PublicKey, enc *SharedAReader, shares Keys) (*SharedA, error) {
	return p.encSShare(pk, enc, shares)
}

// encSShare is EncSShare on Enc's residues read from enc.
func (p *Params) encSShare(pk *PublicKey, enc rowReader, shares Keys) (*SharedA, error) {
	head := enc.header()
	if err := head.matches(p.DBShape(head.Rows, p.Lit.Inner)); err != nil {
		return nil, fmt.Errorf("Enc: %w", err)
	}
	if want := p.Lit.Inner / p.NQ; len(shares) != want {
		return nil, fmt.Errorf("%w: %d query secret shares, the parameters have %d query secrets", errs.ErrInvalid, len(shares), want)
	}
	all := p.allPrimes()
	out, err := encryptPK(p.DB, len(all)-1, pk, head.Rows, p.NQ, nil, p.ModulusK(), "EncS share")
	if err != nil {
		return nil, err
	}
	sInv := p.secretsInv(shares)
	band := min(encSBand, p.NDB)
	buf := NewMat(band, p.Lit.Inner)
	for l := range all {
		for _, part := range []Mat{out.A[l], out.B[l]} {
			for r0 := 0; r0 < part.Rows; r0 += band {
				rows := min(band, part.Rows-r0)
				x := Mat{Rows: rows, Cols: buf.Cols, Data: buf.Data[:rows*buf.Cols]}
				if err := enc.Next(&x); err != nil {
					return nil, err
				}
				p.addMulSecretPrime(l, sInv, x, Mat{Rows: rows, Cols: part.Cols, Data: part.Data[r0*part.Cols : (r0+rows)*part.Cols]})
			}
		}
	}
	return out, nil
}

// encSBand is the number of Enc's rows EncSShareFrom reads at a time: 256
// MB of int32 residues of one prime at 2^14 positions.
const encSBand = 4096

// CombineEncS adds the holders' contributions (EncSShare's, one per
// holder of query-secret shares: exactly QueryShares of them) into EncS
// (EncSSum on contributions in memory).
func (p *Params) CombineEncS(shares []*SharedA) (*SharedA, error) {
	if len(shares) == 0 {
		return nil, fmt.Errorf("%w: no EncS contribution, the query secrets have %d shares", errs.ErrInvalid, p.Lit.QueryShares)
	}
	sum, err := p.NewEncSSum(shares[0].Rows)
	if err != nil {
		return nil, err
	}
	for h, c := range shares {
		r, err := newMemReader(c, fmt.Sprintf("EncS contribution %d", h))
		if err == nil {
			err = sum.add(r)
		}
		if err != nil {
			return nil, err
		}
	}
	return sum.Result()
}

// addResidues sets dst to dst + src modulo q, centered.
func addResidues(dst, src []int32, q uint64) {
	for k, v := range src {
		dst[k] = center(modInt(int64(dst[k])+int64(v), q), q)
	}
}

// dbSecretVar is the variance of a database secret's coefficient: 2/3
// for one holder's ternary secret, 2 n / 3 for a sum of n = DBShares
// parties' shares.
func (p *Params) dbSecretVar() float64 {
	return 2 * float64(max(1, p.Lit.DBShares)) / 3
}

// encVar is the variance of Enc's noise E1: sigma^2 when the key holder
// encrypts with the secrets, (1 + 4 n N_db / 3) sigma^2 with the public
// key of n = DBShares parties' shares (as queryNoiseVar).
func (p *Params) encVar() float64 {
	if p.Lit.DBShares == 0 {
		return p.sigma * p.sigma
	}
	return (1 + 4*float64(p.Lit.DBShares)*float64(p.NDB)/3) * p.sigma * p.sigma
}

// encSVar is the variance of EncS's noise E2: sigma^2 when the key
// holder encrypts M S_q; E1 S_q plus the n = QueryShares encryptions of
// zero otherwise: Var(E1) (Inner 2 n / 3 + n).
func (p *Params) encSVar() float64 {
	if p.Lit.DBShares == 0 {
		return p.sigma * p.sigma
	}
	n := float64(p.Lit.QueryShares)
	return p.encVar() * (float64(p.Lit.Inner)*2*n/3 + n)
}

// EncBound bounds Enc's noise |E1|: the sampler's truncation (the key
// holder's secret-key encryption), or Tail standard deviations (public
// key).
func (p *Params) EncBound() float64 {
	if p.Lit.DBShares == 0 {
		return p.bound
	}
	return Tail * math.Sqrt(p.encVar())
}

// EncSBound bounds EncS's noise |E2| as EncBound does Enc's.
func (p *Params) EncSBound() float64 {
	if p.Lit.DBShares == 0 {
		return p.bound
	}
	return Tail * math.Sqrt(p.encSVar())
}

// EncSSum adds EncS contributions read one at a time from their binary
// forms (CombineEncS without holding them all): memory holds the sum and
// one band of a contribution.
type EncSSum struct {
	p     *Params
	sum   *SharedA
	added int
}

// NewEncSSum starts the sum of the contributions to the EncS of a
// database of rows rows.
func (p *Params) NewEncSSum(rows int) (*EncSSum, error) {
	if rows <= 0 || rows%p.NDB != 0 {
		return nil, fmt.Errorf("%w: a database of %d rows (a multiple of %d)", errs.ErrInvalid, rows, p.NDB)
	}
	sum := p.DBShape(rows, p.NQ)
	for range sum.Moduli {
		sum.A = append(sum.A, NewMat(p.NDB, p.NQ))
		sum.B = append(sum.B, NewMat(rows, p.NQ))
	}
	return &EncSSum{p: p, sum: sum}, nil
}

// Add reads one contribution (its header already read by
// NewSharedAReader, checked here against EncS's shape) and adds it.
func (s *EncSSum) Add(r *SharedAReader) error { return s.add(r) }

// add is Add on a contribution's residues read from r.
func (s *EncSSum) add(r rowReader) error {
	if err := r.header().matches(s.sum); err != nil {
		return fmt.Errorf("EncS contribution: %w", err)
	}
	band := min(encSBand, s.p.NDB)
	buf := NewMat(band, s.p.NQ)
	for l, q := range s.sum.Moduli {
		for _, part := range []Mat{s.sum.A[l], s.sum.B[l]} {
			for r0 := 0; r0 < part.Rows; r0 += band {
				rows := min(band, part.Rows-r0)
				x := Mat{Rows: rows, Cols: buf.Cols, Data: buf.Data[:rows*buf.Cols]}
				if err := r.Next(&x); err != nil {
					return err
				}
				addResidues(part.Data[r0*part.Cols:(r0+rows)*part.Cols], x.Data, q)
			}
		}
	}
	s.added++
	return nil
}

// Result is EncS, once exactly QueryShares contributions are added.
func (s *EncSSum) Result() (*SharedA, error) {
	if s.added != s.p.Lit.QueryShares {
		return nil, fmt.Errorf("%w: %d EncS contributions, the query secrets have %d shares", errs.ErrInvalid, s.added, s.p.Lit.QueryShares)
	}
	return s.sum, nil
}

// rowReader yields a matrix's residues in its binary form's order: per
// prime, the a-part's N rows, then the b-part's rows, a whole number of
// rows of one part at a time (SharedAReader from a file, memReader from
// memory).
type rowReader interface {
	header() *SharedA
	Next(dst *Mat) error
}

func (s *SharedAReader) header() *SharedA { return s.Head }

// memReader is a rowReader over a SharedA in memory.
type memReader struct {
	c          *SharedA
	prime, row int // as SharedAReader's
}

// newMemReader checks that c's residue matrices have its shape (what
// names c in errors).
func newMemReader(c *SharedA, what string) (*memReader, error) {
	if c == nil || len(c.A) != len(c.Moduli) || len(c.B) != len(c.Moduli) {
		return nil, fmt.Errorf("%w: %s missing or without a matrix per prime", errs.ErrInvalid, what)
	}
	for i := range c.Moduli {
		if len(c.A[i].Data) != c.N()*c.Cols || len(c.B[i].Data) != c.Rows*c.Cols {
			return nil, fmt.Errorf("%w: %s's residue matrices do not have its shape", errs.ErrInvalid, what)
		}
	}
	return &memReader{c: c}, nil
}

func (m *memReader) header() *SharedA { return m.c }

// Next copies the next dst.Rows rows into dst.
func (m *memReader) Next(dst *Mat) error {
	c, n := m.c, m.c.N()
	if m.prime >= len(c.Moduli) {
		return fmt.Errorf("%w: read past the last prime", errs.ErrInvalid)
	}
	src, r0 := c.A[m.prime], m.row
	if m.row >= n {
		src, r0 = c.B[m.prime], m.row-n
	}
	if dst.Cols != c.Cols || dst.Rows <= 0 || r0+dst.Rows > src.Rows || len(dst.Data) != dst.Rows*dst.Cols {
		return fmt.Errorf("%w: a block of %dx%d at row %d of prime %d of a %dx%d matrix in ring %d", errs.ErrInvalid, dst.Rows, dst.Cols, m.row, m.prime, c.Rows, c.Cols, n)
	}
	copy(dst.Data, src.Data[r0*src.Cols:(r0+dst.Rows)*src.Cols])
	if m.row += dst.Rows; m.row == n+c.Rows {
		m.prime, m.row = m.prime+1, 0
	}
	return nil
}
