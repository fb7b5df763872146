// Package ccmm implements the encrypted matrix products of papers/004 §2.3
// and §6.1 at the ring level, after [BCH+24] (eprint 2024/1284) and [BCH+25]
// (arXiv 2503.16080): the shared-a (MSRLWE) ciphertext format for a matrix,
// the ciphertext x plaintext matrix product (PCMM) and the RGSW-style
// ciphertext x ciphertext matrix product (CCMM), both reduced to plaintext
// matrix products (GEMMs) modulo small primes, with an exact basis extension
// of the query and a modulus switch (rescale) of the result back to the
// query modulus.
//
// It is a composition on Lattigo's ring and rlwe packages: secret keys,
// samplers (uniform, Gaussian), NTTs, automorphisms, the exact basis
// extension and the rounded division by the last moduli all come from
// Lattigo. What this package writes is the matrix layout, the CCMM algebra,
// the GEMM kernels and the noise bookkeeping. See docs/IRIS.md, section
// "Encrypted matrix products (core/iris/ccmm)".
package ccmm

import (
	"errors"
	"fmt"
	"math"
	"math/big"

	"encmatch/core/base/errs"
	"encmatch/core/base/params"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
)

// ErrPlainModulus marks a plaintext modulus (ciphertext modulus / scale)
// too small for the integer results the product can take.
var ErrPlainModulus = fmt.Errorf("%w: plaintext modulus too small", errs.ErrInvalid)

// ErrModulus marks moduli that break a relation the algorithm needs
// (NTT-friendly distinct primes, GEMM exactness, DB modulus = Q*K, noise
// below half the scale).
var ErrModulus = fmt.Errorf("%w: modulus relation does not hold", errs.ErrInvalid)

// ErrInsecure marks a (ring degree, modulus, secret distribution) outside
// the HE standard's table for 128-bit security.
var ErrInsecure = errors.New("not 128-bit secure by the HE standard")

// Tail is the number of standard deviations the predicted noise bounds
// allow for sums of many independent terms (a heuristic central-limit
// bound: a Gaussian exceeds 8 sigma with probability about 2^-49.5 per
// coefficient).
const Tail = 8.0

// MaxPrimeBits is the largest prime size this package accepts: residues are
// stored centered in int32 and multiplied exactly by every GEMM engine
// (primes from 2^23 on split into three digits on AVX2, two in the Go
// kernel).
const MaxPrimeBits = 31

// Literal is the user-facing description of a CCMM parameter set.
type Literal struct {
	// LogNDB and LogNQ are the log2 ring degrees of the database and of the
	// query encryption (LogNQ <= LogNDB).
	LogNDB, LogNQ int
	// LogQ (or Q) are the primes of the query and result modulus Q; LogK (or
	// K) those of the extra factor K: the database lives modulo Q*K. Explicit
	// primes win over sizes. Every prime is NTT-friendly for 2*N_db.
	LogQ, LogK []int
	Q, K       []uint64
	// LogScale is log2 of the query scale Delta.
	LogScale int
	// Inner is the inner dimension d2 of the product (the padded code
	// length); a multiple of N_q.
	Inner int
	// MaxAbsDB and MaxAbsQuery bound the entries of the database and query
	// matrices (1 for iris codes in {-1,0,1}); 0 means 1.
	MaxAbsDB, MaxAbsQuery int64
	// QueryShares is the number of parties whose additive shares make
	// each query secret (package collective: no one holds it whole); 0
	// means 1, one key holder. A sum of n ternary shares has coefficients
	// up to n and n times the variance, and its public key n times the
	// error variance: the noise bounds and M*S_q's range take them.
	QueryShares int
	// DBShares is the number of parties whose additive shares make each
	// database block's secret when no one holds it (package collective):
	// the database is then enrolled with public keys only (EncryptDBPK for
	// Enc, the query-share holders' EncSShare for EncS), and the noise
	// bounds take its larger noise and the secret's range (coefficients up
	// to n). 0 means one key holder, who encrypts the database with the
	// secrets (EncryptDB).
	DBShares int
	// Approximate says that the product's results are read as CKKS values
	// (a slot-encoded database, package slotdb), not decrypted to exact
	// integers: NewParams then does not ask ResultBound to stay below
	// Delta/2, and the reader holds the noise to its own bound
	// (slotdb.Encoder.NoiseBound).
	Approximate bool
}

// Iris is the parameter set for papers/004's iris matching: codes of 16,384
// positions in {-1,0,1}, database ring 2^14, query ring 2^13 (as in §6.1.1),
// Q and K of two 20-bit primes each, Delta = 2^22 (room for the noise of
// a public-key query: 2^18.4 predicted; Q/Delta = 2^18.3 holds the scores,
// |score| <= 2^14).
var Iris = Literal{LogNDB: 14, LogNQ: 13, LogQ: []int{20, 20}, LogK: []int{20, 20}, LogScale: 22, Inner: 1 << 14}

// IrisBootstrap is Iris with a third prime in Q (and in K, which must stay
// about Q for the rescale's noise) so that the scores, up to 2^14 at
// Delta = 2^22, leave the half-bootstrap's modular reduction its message
// ratio (package scoreslots; docs/IRIS.md): log Q*K = 123.2. Only four
// 20-bit primes = 1 mod 2^15 exist, so K's are 21-bit.
var IrisBootstrap = Literal{LogNDB: 14, LogNQ: 13, LogQ: []int{20, 20, 20}, LogK: []int{21, 21, 21}, LogScale: 22, Inner: 1 << 14}

// IrisCollective is IrisBootstrap for three parties, none of whom holds
// the query or the database secrets (issue 34; docs/IRIS.md, "Enrollment
// without a key holder"): the database is enrolled with public keys
// (EncryptDBPK, EncSShare), whose noise E2 = E1 S_q + three encryptions
// of zero is about 2^16 times a secret-key encryption's; the product
// divides it by K, so K's primes are 22-bit (log Q*K = 125.9): the
// product's bound is 2^19.5 against Delta/2 = 2^21 (with IrisBootstrap's
// 21-bit primes it would be 2^21.5).
var IrisCollective = Literal{LogNDB: 14, LogNQ: 13, LogQ: []int{20, 20, 20}, LogK: []int{22, 22, 22}, LogScale: 22, Inner: 1 << 14,
	QueryShares: 3, DBShares: 3}

// Toy is a small, INSECURE parameter set for fast tests only.
var Toy = Literal{LogNDB: 6, LogNQ: 5, LogQ: []int{20, 20}, LogK: []int{20, 20}, LogScale: 12, Inner: 128}

// Params is a validated CCMM parameter set.
type Params struct {
	Lit   Literal  // the literal it was built from, defaults filled in
	NDB   int      // database ring degree
	NQ    int      // query ring degree
	Q     []uint64 // query/result primes
	K     []uint64 // extra primes of the database modulus
	Delta uint64   // query scale
	// DB and Query are the Lattigo parameters whose keys this package uses:
	// both are over all the primes Q||K (the query is encrypted modulo Q
	// only, its key lives modulo Q*K so that the database can be encrypted
	// against it).
	DB, Query rlwe.Parameters
	queryAtQ  rlwe.Parameters // the query ring over Q alone: where its secrets are used
	sigma     float64
	bound     float64
}

// NewParams validates a Literal: primes, modulus relations, plaintext
// modulus and the predicted noise of the whole product. It does not require
// 128-bit security (toy sets exist for tests); call Secure for that.
func NewParams(lit Literal) (*Params, error) {
	if lit.MaxAbsDB == 0 {
		lit.MaxAbsDB = 1
	}
	if lit.MaxAbsQuery == 0 {
		lit.MaxAbsQuery = 1
	}
	if lit.QueryShares == 0 {
		lit.QueryShares = 1
	}
	if lit.QueryShares < 1 || lit.QueryShares > 256 {
		return nil, fmt.Errorf("%w: query secrets of %d parties' shares", errs.ErrInvalid, lit.QueryShares)
	}
	if lit.DBShares < 0 || lit.DBShares > 256 {
		return nil, fmt.Errorf("%w: database secrets of %d parties' shares", errs.ErrInvalid, lit.DBShares)
	}
	if lit.LogNQ < 1 || lit.LogNQ > lit.LogNDB || lit.LogNDB > 17 {
		return nil, fmt.Errorf("%w: ring degrees 2^%d (query) and 2^%d (database): need 1 <= logNq <= logNdb <= 17", errs.ErrInvalid, lit.LogNQ, lit.LogNDB)
	}
	p := &Params{Lit: lit, NDB: 1 << lit.LogNDB, NQ: 1 << lit.LogNQ}
	if lit.Inner <= 0 || lit.Inner%p.NQ != 0 {
		return nil, fmt.Errorf("%w: inner dimension %d is not a positive multiple of N_q = %d", errs.ErrInvalid, lit.Inner, p.NQ)
	}
	if lit.LogScale < 1 || lit.LogScale > 62 {
		return nil, fmt.Errorf("%w: log scale %d", errs.ErrInvalid, lit.LogScale)
	}
	p.Delta = 1 << lit.LogScale
	nth := uint64(2 * p.NDB)
	var err error
	gens := map[int]*ring.NTTFriendlyPrimesGenerator{}
	pick := func(explicit []uint64, sizes []int, what string) ([]uint64, error) {
		if len(explicit) > 0 {
			return append([]uint64(nil), explicit...), nil
		}
		out := make([]uint64, len(sizes))
		for i, b := range sizes {
			if b < 2 || b > MaxPrimeBits {
				return nil, fmt.Errorf("%w: %s prime of %d bits: need 2..%d", ErrModulus, what, b, MaxPrimeBits)
			}
			g, ok := gens[b]
			if !ok {
				v := ring.NewNTTFriendlyPrimesGenerator(uint64(b), nth)
				g = &v
				gens[b] = g
			}
			if out[i], err = g.NextAlternatingPrime(); err != nil {
				return nil, fmt.Errorf("%w: no more %d-bit primes = 1 mod %d: %v", ErrModulus, b, nth, err)
			}
		}
		return out, nil
	}
	if p.Q, err = pick(lit.Q, lit.LogQ, "Q"); err != nil {
		return nil, err
	}
	if p.K, err = pick(lit.K, lit.LogK, "K"); err != nil {
		return nil, err
	}
	if len(p.Q) == 0 || len(p.K) == 0 {
		return nil, fmt.Errorf("%w: Q and K need at least one prime each (Q: %d, K: %d)", ErrModulus, len(p.Q), len(p.K))
	}
	seen := map[uint64]string{}
	for i, q := range append(append([]uint64(nil), p.Q...), p.K...) {
		what := "Q"
		if i >= len(p.Q) {
			what = "K"
		}
		switch {
		case !ring.IsPrime(q):
			return nil, fmt.Errorf("%w: %s modulus %d is not prime", ErrModulus, what, q)
		case q%nth != 1:
			return nil, fmt.Errorf("%w: %s prime %d is not 1 mod 2*N_db = %d (no NTT)", ErrModulus, what, q, nth)
		case q >= 1<<MaxPrimeBits:
			return nil, fmt.Errorf("%w: %s prime %d has more than %d bits", ErrModulus, what, q, MaxPrimeBits)
		case seen[q] != "":
			return nil, fmt.Errorf("%w: prime %d appears in %s and %s: the database modulus must be Q*K with Q and K coprime", ErrModulus, q, seen[q], what)
		}
		seen[q] = what
	}
	// MulSecret computes M*S_q modulo the first two primes and recombines
	// the integers (int32) from their residues.
	all := p.allPrimes()
	if b := float64(lit.Inner) * float64(lit.MaxAbsDB) * float64(lit.QueryShares); b >= math.Ldexp(1, 31) || b >= float64(all[0])*float64(all[1])/2 {
		return nil, fmt.Errorf("%w: M*S_q (entries up to %.0f) does not fit 2^31 and the first two primes %d, %d", ErrModulus, b, all[0], all[1])
	}
	if p.DB, err = rlwe.NewParametersFromLiteral(rlwe.ParametersLiteral{LogN: lit.LogNDB, Q: all, NTTFlag: true}); err != nil {
		return nil, fmt.Errorf("%w: database ring: %v", ErrModulus, err)
	}
	if p.Query, err = rlwe.NewParametersFromLiteral(rlwe.ParametersLiteral{LogN: lit.LogNQ, Q: all, NTTFlag: true}); err != nil {
		return nil, fmt.Errorf("%w: query ring: %v", ErrModulus, err)
	}
	if p.queryAtQ, err = rlwe.NewParametersFromLiteral(rlwe.ParametersLiteral{LogN: lit.LogNQ, Q: p.Q, NTTFlag: true}); err != nil {
		return nil, fmt.Errorf("%w: query ring: %v", ErrModulus, err)
	}
	xe, ok := p.DB.Xe().(ring.DiscreteGaussian)
	if !ok {
		return nil, fmt.Errorf("%w: error distribution %v is not a discrete Gaussian", errs.ErrInvalid, p.DB.Xe())
	}
	p.sigma, p.bound = xe.Sigma, xe.Bound
	// Plaintext modulus: results are integers of at most Inner*|db|*|q|.
	maxScore := new(big.Int).Mul(big.NewInt(int64(lit.Inner)), big.NewInt(lit.MaxAbsDB*lit.MaxAbsQuery))
	if err := checkPlain(p.ModulusQ(), p.Delta, maxScore); err != nil {
		return nil, err
	}
	if b := p.ResultBound(); !lit.Approximate && b >= float64(p.Delta)/2 {
		return nil, fmt.Errorf("%w: predicted noise %.0f (2^%.1f) after the product is not below Delta/2 = 2^%d: raise the scale or K", ErrModulus, b, math.Log2(b), lit.LogScale-1)
	}
	return p, nil
}

// checkPlain refuses a plaintext modulus Q/Delta that cannot hold the
// integers in [-maxAbs, maxAbs].
func checkPlain(Q *big.Int, delta uint64, maxAbs *big.Int) error {
	t := new(big.Int).Quo(Q, new(big.Int).SetUint64(delta))
	need := new(big.Int).Lsh(maxAbs, 1)
	need.Add(need, big.NewInt(1))
	if t.Cmp(need) < 0 {
		return fmt.Errorf("%w: Q/Delta = %v (2^%.1f) cannot hold results up to +-%v (need > %v)", ErrPlainModulus, t, bitLen(t), maxAbs, need)
	}
	return nil
}

func bitLen(x *big.Int) float64 {
	f, _ := new(big.Float).SetInt(x).Float64()
	return math.Log2(f)
}

// LogQ is log2 of the query and result modulus Q.
func (p *Params) LogQ() float64 { return bitLen(p.ModulusQ()) }

// ModulusQ is the query and result modulus Q.
func (p *Params) ModulusQ() *big.Int { return prod(p.Q) }

// ModulusK is the extra factor K of the database modulus.
func (p *Params) ModulusK() *big.Int { return prod(p.K) }

func prod(ps []uint64) *big.Int {
	x := big.NewInt(1)
	for _, q := range ps {
		x.Mul(x, new(big.Int).SetUint64(q))
	}
	return x
}

// Sigma is the standard deviation of the fresh encryption noise.
func (p *Params) Sigma() float64 { return p.sigma }

// FreshBound bounds every coefficient of a fresh encryption's noise (the
// truncation bound of Lattigo's Gaussian sampler).
func (p *Params) FreshBound() float64 { return p.bound }

func (p *Params) ratioQK() float64 {
	f, _ := new(big.Float).Quo(new(big.Float).SetInt(p.ModulusQ()), new(big.Float).SetInt(p.ModulusK())).Float64()
	return f
}

// RawBound predicts the noise of the CCMM result before the rescale (modulo
// Q*K, scale K*Delta) for a public-key query (the larger noise):
// K*M_db*E_q + E1*B_q + E2*A_q with B_q, A_q uniform modulo Q (E1, E2 as
// the database was made: encVar, encSVar).
func (p *Params) RawBound() float64 { return p.RawBoundFor(true) }

// RawBoundFor is RawBound for a query encrypted with the public key or
// with the secrets.
func (p *Params) RawBoundFor(publicKey bool) float64 {
	k, _ := new(big.Float).SetInt(p.ModulusK()).Float64()
	q, _ := new(big.Float).SetInt(p.ModulusQ()).Float64()
	w := float64(p.Lit.MaxAbsDB)
	v := k*k*float64(p.Lit.Inner)*w*w*p.queryNoiseVar(publicKey) + p.dbNoiseVar()*q*q/12
	return Tail * math.Sqrt(v)
}

// ResultBound predicts the noise of the CCMM result after the rescale by K
// (modulo Q, scale Delta) for a public-key query: M_db*E_q + (E1*B_q +
// E2*A_q)/K plus the rounding of a and b (at most 1/2 per division, times
// the database secret for a). NewParams requires it below Delta/2.
func (p *Params) ResultBound() float64 { return p.ResultBoundFor(true) }

// ResultBoundFor is ResultBound for a query encrypted with the public key
// or with the secrets.
func (p *Params) ResultBoundFor(publicKey bool) float64 {
	w := float64(p.Lit.MaxAbsDB)
	r := p.ratioQK()
	v := float64(p.Lit.Inner)*w*w*p.queryNoiseVar(publicKey) +
		p.dbNoiseVar()*r*r/12 +
		2.0/12*(1+float64(p.NDB)*p.dbSecretVar())
	return Tail * math.Sqrt(v)
}

// dbNoiseVar is the variance of one row of the database's noise against
// a uniform query column (E1 B_q + E2 A_q, before the factor q^2/12):
// Inner entries of E1 and N_q of E2.
func (p *Params) dbNoiseVar() float64 {
	return float64(p.Lit.Inner)*p.encVar() + float64(p.NQ)*p.encSVar()
}

// PlainProductBound predicts the noise of a ciphertext x plaintext product
// E*U for fresh noise E and a plaintext U of inner dimension inner and
// entries bounded by maxAbs: the smaller of the worst case and Tail
// standard deviations.
func (p *Params) PlainProductBound(inner int, maxAbs int64) float64 {
	u := float64(maxAbs)
	return math.Min(float64(inner)*u*p.bound, Tail*math.Sqrt(float64(inner))*u*p.sigma)
}

// SecurityCheck is one (ring degree, modulus, secret distribution) checked
// against the HE standard's 128-bit table, or, for a secret outside the
// table, against the bound its Source states.
type SecurityCheck struct {
	What    string  `json:"what"`             // which secrets
	LogN    int     `json:"log_n"`            // log2 ring degree
	LogQ    float64 `json:"log_q"`            // log2 of the largest modulus they are used at
	MaxLogQ int     `json:"max_log_q"`        // the bound for LogN (0: not in the table)
	Secret  string  `json:"secret"`           // the secret distribution
	Source  string  `json:"source,omitempty"` // where MaxLogQ comes from, when not the HE standard's table
	OK      bool    `json:"ok"`               // 128-bit secure by the table (or Source)
}

// Security lists the checks of every key this package uses: the database
// secrets (ring N_db, modulus Q*K) and the query secrets (ring N_q,
// modulus Q). A query secret's RLWE samples exist modulo Q only: the query
// public key (GenQueryPublicKey) and the queries (EncryptQuery,
// EncryptQueryPK) are made modulo Q; modulo Q*K it appears only inside the
// database, as messages encrypted under the database secrets, which are
// checked at Q*K. (Its Lattigo parameters span Q*K so that the database
// can be encrypted against it; nothing is encrypted under it there.) The
// bound is params.MaxLogQPFor128 (HE standard, uniform ternary secret,
// sigma 3.2).
func (p *Params) Security() []SecurityCheck {
	return []SecurityCheck{CheckRLWE("database secret", p.DB), CheckRLWE("query secret", p.queryAtQ)}
}

// CheckRLWE checks the keys of Lattigo parameters par against the HE
// standard's 128-bit table (params.MaxLogQPFor128: uniform ternary secret,
// Gaussian error of sigma >= 3.19) at their largest modulus QP.
func CheckRLWE(what string, par rlwe.Parameters) SecurityCheck {
	bound, known := params.MaxLogQPFor128[par.LogN()]
	xs, tern := par.Xs().(ring.Ternary)
	uniformTernary := tern && xs.H == 0 && math.Abs(xs.P-2.0/3) < 1e-12
	xe, gauss := par.Xe().(ring.DiscreteGaussian)
	ok := known && par.LogQP() <= float64(bound) && uniformTernary && gauss && xe.Sigma >= 3.19
	return SecurityCheck{What: what, LogN: par.LogN(), LogQ: par.LogQP(), MaxLogQ: bound, Secret: fmt.Sprintf("%v", par.Xs()), OK: ok}
}

// Secure returns nil when every check of Security passes, else an
// ErrInsecure error naming the failing ones.
func (p *Params) Secure() error { return FailedChecks(p.Security()) }

// FailedChecks returns nil when every check passes, else an ErrInsecure
// error naming the failing ones.
func FailedChecks(checks []SecurityCheck) error {
	var bad []string
	for _, c := range checks {
		if !c.OK {
			bad = append(bad, fmt.Sprintf("%s: N=2^%d, log Q=%.1f, max %d, secret %s", c.What, c.LogN, c.LogQ, c.MaxLogQ, c.Secret))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %v", ErrInsecure, bad)
	}
	return nil
}
