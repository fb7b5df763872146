package ccmm

import (
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"encmatch/core/base/errs"
)

// irisLike returns rows x cols entries m*(1-2c) in {-1,0,1}: codes c
// uniform bits, masks m set with probability 0.8.
func irisLike(rng *rand.Rand, rows, cols int) IntMat {
	m := NewIntMat(rows, cols)
	for i := range m.Data {
		if rng.Float64() < 0.8 {
			m.Data[i] = 1 - 2*int64(rng.IntN(2))
		}
	}
	return m
}

// queryFrom builds an inner x d3 query whose column 0 is database row 0
// with 10 % of the positions flipped (a genuine match) and the others
// random.
func queryFrom(rng *rand.Rand, db IntMat, d3 int) IntMat {
	q := irisLike(rng, db.Cols, d3)
	for l := 0; l < db.Cols; l++ {
		v := db.At(0, l)
		if rng.Float64() < 0.1 {
			v = -v
		}
		q.Data[l*d3] = v
	}
	return q
}

func transposeInt(m IntMat) IntMat {
	t := NewIntMat(m.Cols, m.Rows)
	for i := 0; i < m.Rows; i++ {
		for j := 0; j < m.Cols; j++ {
			t.Data[j*m.Rows+i] = m.At(i, j)
		}
	}
	return t
}

func mustParams(t testing.TB, lit Literal) *Params {
	t.Helper()
	p, err := NewParams(lit)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func checkNoise(t *testing.T, stage string, measured, bound float64) {
	t.Helper()
	t.Logf("%-28s noise 2^%5.1f  bound 2^%5.1f  margin %4.1f bits", stage, math.Log2(measured+1), math.Log2(bound), math.Log2(bound/(measured+1)))
	if measured > bound {
		t.Fatalf("%s: noise %.0f above the predicted bound %.0f", stage, measured, bound)
	}
}

func equalInt(t *testing.T, what string, got, want IntMat) {
	t.Helper()
	if got.Rows != want.Rows || got.Cols != want.Cols {
		t.Fatalf("%s: %dx%d, want %dx%d", what, got.Rows, got.Cols, want.Rows, want.Cols)
	}
	for i := range want.Data {
		if got.Data[i] != want.Data[i] {
			t.Fatalf("%s: entry (%d,%d) = %d, model %d", what, i/want.Cols, i%want.Cols, got.Data[i], want.Data[i])
		}
	}
}

// midIris has the iris inner dimension (16,384) in small rings: exact
// iris scores at full code length, in a test that runs in about a second.
// INSECURE (N = 2^7).
var midIris = Literal{LogNDB: 7, LogNQ: 6, LogQ: []int{20, 20}, LogK: []int{20, 20}, LogScale: 18, Inner: 1 << 14}

// runCCMM encrypts a database of d1 rows and a query of d3 columns, runs
// the CCMM stage by stage, checks every stage's noise against its
// predicted bound and the decrypted scores against the plaintext model.
// With publicKey, the query is encrypted with the public key only.
func runCCMM(t *testing.T, p *Params, d1, d3 int, seed uint64, publicKey bool) {
	rng := rand.New(rand.NewPCG(seed, 1))
	sk, err := p.GenSecrets(d1)
	if err != nil {
		t.Fatal(err)
	}
	mdb := irisLike(rng, d1, p.Lit.Inner)
	mq := queryFrom(rng, mdb, d3)
	want, _ := MulInt(mdb, mq)

	tm := time.Now()
	lap := func(what string) {
		t.Logf("%-28s %8.2f s", what, time.Since(tm).Seconds())
		tm = time.Now()
	}
	var qct *SharedA
	if publicKey {
		pk, err := p.GenQueryPublicKey(sk)
		if err != nil {
			t.Fatal(err)
		}
		tm = time.Now()
		qct, err = p.EncryptQueryPK(pk, mq)
		if err != nil {
			t.Fatal(err)
		}
		lap("encrypt query (public key)")
	} else {
		qct, err = p.EncryptQuery(sk, mq)
		lap("encrypt query (secret key)")
	}
	if err != nil {
		t.Fatal(err)
	}
	e, err := Noise(p.Query, sk.Query, qct, mq)
	if err != nil {
		t.Fatal(err)
	}
	checkNoise(t, "query (fresh, mod Q)", e, p.QueryFreshBound(publicKey))

	tm = time.Now()
	db, err := p.EncryptDB(sk, mdb)
	if err != nil {
		t.Fatal(err)
	}
	lap("encrypt database")
	e, _ = Noise(p.DB, sk.DB, db.Enc, mdb)
	checkNoise(t, "database K*M (mod QK)", e, p.FreshBound())
	if d1*p.NQ <= 1<<22 { // the model of M*S_q costs memory: small sizes only
		msRes := p.MulSecret(sk.Query, mdb)
		ms := NewIntMat(d1, p.NQ)
		for i, v := range msRes.Data {
			ms.Data[i] = int64(v)
		}
		e, _ = Noise(p.DB, sk.DB, db.EncS, ms)
		checkNoise(t, "database K*M*S_q (mod QK)", e, p.FreshBound())
	}

	tm = time.Now()
	raw, err := p.MultiplyRaw(db, qct)
	if err != nil {
		t.Fatal(err)
	}
	lap("extend query + GEMMs")
	e, _ = Noise(p.DB, sk.DB, raw, want)
	checkNoise(t, "GEMMs (mod QK, scale K*D)", e, p.RawBoundFor(publicKey))

	tm = time.Now()
	res, err := p.Rescale(raw)
	if err != nil {
		t.Fatal(err)
	}
	lap("rescale by K")
	e, _ = Noise(p.DB, sk.DB, res, want)
	checkNoise(t, "rescaled (mod Q, scale D)", e, p.ResultBoundFor(publicKey))
	if e >= float64(p.Delta)/2 {
		t.Fatalf("noise %.0f reaches Delta/2", e)
	}
	got, err := Decrypt(p.DB, sk.DB, res)
	if err != nil {
		t.Fatal(err)
	}
	equalInt(t, "CCMM scores", got, want)
	t.Logf("d1=%d inner=%d d3=%d: genuine score %d, largest |score| %d", d1, p.Lit.Inner, d3, want.At(0, 0), want.MaxAbs())
}

// TestProductOfColumns: the product with a query's columns selected
// (SharedA.Columns, as a pair pass selects its eyes) decrypts to those
// columns of the scores, in the selection's order; a selection outside the
// query or an empty one is refused.
func TestProductOfColumns(t *testing.T) {
	p := mustParams(t, Toy)
	rng := rand.New(rand.NewPCG(4, 1))
	sk, err := p.GenSecrets(2 * p.NDB)
	if err != nil {
		t.Fatal(err)
	}
	mdb := irisLike(rng, 2*p.NDB, p.Lit.Inner)
	mq := queryFrom(rng, mdb, 7)
	want, _ := MulInt(mdb, mq)
	pk, err := p.GenQueryPublicKey(sk)
	if err != nil {
		t.Fatal(err)
	}
	qct, err := p.EncryptQueryPK(pk, mq)
	if err != nil {
		t.Fatal(err)
	}
	db, err := p.EncryptDB(sk, mdb)
	if err != nil {
		t.Fatal(err)
	}
	cols := []int{5, 0, 3}
	sub, err := qct.Columns(cols)
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Multiply(db, sub)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decrypt(p.DB, sk.DB, res)
	if err != nil {
		t.Fatal(err)
	}
	wantSub := NewIntMat(want.Rows, len(cols))
	for r := 0; r < want.Rows; r++ {
		for k, j := range cols {
			wantSub.Data[r*len(cols)+k] = want.At(r, j)
		}
	}
	equalInt(t, "scores of the selected columns", got, wantSub)
	for _, bad := range [][]int{nil, {7}, {-1}} {
		if _, err := qct.Columns(bad); !errors.Is(err, errs.ErrInvalid) {
			t.Fatalf("columns %v: %v", bad, err)
		}
	}
}

func TestCCMMToy(t *testing.T) {
	p := mustParams(t, Toy)
	t.Run("secret-key query", func(t *testing.T) { runCCMM(t, p, 2*p.NDB, 7, 1, false) })
	t.Run("public-key query", func(t *testing.T) { runCCMM(t, p, 2*p.NDB, 7, 11, true) })
}

func TestCCMMIrisLength(t *testing.T) {
	p := mustParams(t, midIris)
	runCCMM(t, p, p.NDB, 5, 2, true)
}

// TestCCMMIrisPreset runs the secure iris parameters (N_db = 2^14, N_q =
// 2^13, 16,384 positions) on 2^14 database rows and 2 query columns
// (ENCMATCH_CCMM_COLUMNS sets another number: 992 is papers/004's 32 eyes
// x 31 rotations). Slow (minutes, ~20 GB): it runs only with
// ENCMATCH_CCMM_SLOW=1, and never with -short.
func TestCCMMIrisPreset(t *testing.T) {
	if testing.Short() || os.Getenv("ENCMATCH_CCMM_SLOW") != "1" {
		t.Skip("slow test at the secure iris parameters: set ENCMATCH_CCMM_SLOW=1 to run it")
	}
	p := mustParams(t, Iris)
	if err := p.Secure(); err != nil {
		t.Fatal(err)
	}
	columns := 2
	if v, err := strconv.Atoi(os.Getenv("ENCMATCH_CCMM_COLUMNS")); err == nil && v > 0 {
		columns = v
	}
	runCCMM(t, p, p.NDB, columns, 3, true)
}

// TestCCMMSecureRings runs the secure iris rings and moduli (N_db = 2^14,
// N_q = 2^13, Q and K of 2 x 20 bits, Delta = 2^22) with half the code
// length (8,192 positions) on 2^14 database rows: about 10 GB, minutes.
// Only with ENCMATCH_CCMM_SLOW=1.
func TestCCMMSecureRings(t *testing.T) {
	if testing.Short() || os.Getenv("ENCMATCH_CCMM_SLOW") != "1" {
		t.Skip("slow test at the secure iris rings: set ENCMATCH_CCMM_SLOW=1 to run it")
	}
	lit := Iris
	lit.Inner = 1 << 13
	p := mustParams(t, lit)
	if err := p.Secure(); err != nil {
		t.Fatal(err)
	}
	runCCMM(t, p, p.NDB, 2, 12, true)
}

// TestMulSecret checks the ring computation of M*S_q against the explicit
// stack of negacyclic matrices, for iris codes and for entries whose
// products exceed the first prime (up to 2^20: sums of about 2^22), which
// only the recombination from two primes gets right.
func TestMulSecret(t *testing.T) {
	p := mustParams(t, Toy)
	rng := rand.New(rand.NewPCG(4, 1))
	sk, _ := p.GenSecrets(p.NDB)
	wide := NewIntMat(3, p.Lit.Inner)
	for i := range wide.Data {
		wide.Data[i] = rng.Int64N(1<<21+1) - 1<<20
	}
	r := p.Query.RingQ()
	n := p.NQ
	s := NewIntMat(p.Lit.Inner, n) // S_q: block t is Rot(s_t), Rot(s)[l][k] = coeff l of s*X^k
	for ti, k := range sk.Query {
		c := r.NewPoly()
		r.IMForm(k.Value.Q, c)
		r.INTT(c, c)
		for l := 0; l < n; l++ {
			for kk := 0; kk < n; kk++ {
				idx, sign := l-kk, int64(1)
				if idx < 0 {
					idx, sign = idx+n, -1
				}
				s.Data[(ti*n+l)*n+kk] = sign * int64(center(c.Coeffs[0][idx], p.Q[0]))
			}
		}
	}
	for _, m := range []IntMat{irisLike(rng, 3, p.Lit.Inner), wide} {
		got := p.MulSecret(sk.Query, m)
		want, _ := MulInt(m, s)
		if w := want.MaxAbs(); m.MaxAbs() > 1 && w < int64(p.Q[0]/2) {
			t.Fatalf("the wide case's largest entry %d fits the first prime: it tests nothing", w)
		}
		for i, v := range want.Data {
			if int64(got.Data[i]) != v {
				t.Fatalf("M*S_q entry %d: %d, want %d (entries up to %d)", i, got.Data[i], v, m.MaxAbs())
			}
		}
	}
}

// TestPCMM: ciphertext (shared-a, database ring, modulo Q) times a
// plaintext matrix.
func TestPCMM(t *testing.T) {
	p := mustParams(t, Toy)
	rng := rand.New(rand.NewPCG(5, 1))
	sk, _ := p.GenSecrets(2 * p.NDB)
	m := irisLike(rng, 2*p.NDB, 96)
	u := irisLike(rng, 96, 9)
	want, _ := MulInt(m, u)
	ct, err := Encrypt(p.DB, sk.DB, len(p.Q)-1, m, new(big.Int).SetUint64(p.Delta))
	if err != nil {
		t.Fatal(err)
	}
	e, _ := Noise(p.DB, sk.DB, ct, m)
	checkNoise(t, "fresh (mod Q)", e, p.FreshBound())
	out, err := MulPlain(ct, u, 1)
	if err != nil {
		t.Fatal(err)
	}
	e, _ = Noise(p.DB, sk.DB, out, want)
	checkNoise(t, "ct x pt (mod Q)", e, p.PlainProductBound(96, 1))
	got, _ := Decrypt(p.DB, sk.DB, out)
	equalInt(t, "PCMM", got, want)

	// A plaintext too large for Q/Delta is refused.
	big := NewIntMat(96, 1)
	for i := range big.Data {
		big.Data[i] = 1 << 24
	}
	if _, err := MulPlain(ct, big, 1); !errors.Is(err, ErrPlainModulus) {
		t.Fatalf("MulPlain by entries 2^24: %v, want ErrPlainModulus", err)
	}
}

// TestCenter: center maps [0, q) onto (-q/2, q/2] and Uncenter inverts
// it, at the boundaries of small and wide primes.
func TestCenter(t *testing.T) {
	for _, q := range []uint64{3, 1146881, 2147483629} {
		for _, v := range []uint64{0, 1, q / 2, q/2 + 1, q - 1} {
			want := int64(v)
			if v > q/2 {
				want -= int64(q)
			}
			if got := center(v, q); int64(got) != want || Uncenter(got, q) != v {
				t.Fatalf("center(%d, %d) = %d, want %d", v, q, got, want)
			}
		}
	}
}

func TestGEMMExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 1))
	for _, c := range []struct {
		q    uint64
		dims [3]int
	}{
		// below 2^20; 2^31 - 1 (the Go kernel's digits from an inner
		// dimension of 4 on, the AVX2 engine's three digits)
		{1048573, [3]int{5, 33, 7}}, {1048573, [3]int{8, 64, 8}}, {1048573, [3]int{1, 1, 1}},
		{2147483647, [3]int{5, 33, 7}}, {2147483647, [3]int{8, 300, 9}}, {2147483647, [3]int{1, 3, 1}},
	} {
		q, dims := c.q, c.dims
		x, y := NewMat(dims[0], dims[1]), NewMat(dims[2], dims[1])
		for i := range x.Data {
			x.Data[i] = int32(rng.Int64N(int64(q))) - int32(q/2)
		}
		for i := range y.Data {
			y.Data[i] = int32(rng.Int64N(int64(q))) - int32(q/2)
		}
		ci := gemmGo(x, y, q)
		cf := GEMM(x, y, q) // the engine GEMMEngine names
		for i := 0; i < dims[0]; i++ {
			for j := 0; j < dims[2]; j++ {
				s := new(big.Int)
				for l := 0; l < dims[1]; l++ {
					s.Add(s, new(big.Int).Mul(big.NewInt(int64(x.Data[i*dims[1]+l])), big.NewInt(int64(y.Data[j*dims[1]+l]))))
				}
				w := center(s.Mod(s, new(big.Int).SetUint64(q)).Uint64(), q)
				if ci.Data[i*dims[2]+j] != w || cf.Data[i*dims[2]+j] != w {
					t.Fatalf("GEMM %v (%d,%d): Go %d dispatched %d, want %d", dims, i, j, ci.Data[i*dims[2]+j], cf.Data[i*dims[2]+j], w)
				}
			}
		}
	}
}

// TestSecurity: every (ring degree, modulus, secret distribution) of the
// iris set passes the HE-standard 128-bit check; the toy set fails it.
func TestSecurity(t *testing.T) {
	p := mustParams(t, Iris)
	for _, c := range p.Security() {
		t.Logf("iris %s: N=2^%d log Q=%.1f (max %d) secret %s ok=%v", c.What, c.LogN, c.LogQ, c.MaxLogQ, c.Secret, c.OK)
	}
	if err := p.Secure(); err != nil {
		t.Fatal(err)
	}
	if err := mustParams(t, Toy).Secure(); !errors.Is(err, ErrInsecure) {
		t.Fatalf("toy: %v, want ErrInsecure", err)
	}
	t.Logf("iris: Q = 2^%.1f, K = 2^%.1f, Delta = 2^%d, predicted noise 2^%.1f raw, 2^%.1f after rescale",
		bitLen(p.ModulusQ()), bitLen(p.ModulusK()), p.Lit.LogScale, math.Log2(p.RawBound()), math.Log2(p.ResultBound()))
}

// TestNegative: parameter sets and operands that break a relation the
// algorithm needs are refused with a clear error.
func TestNegative(t *testing.T) {
	good := mustParams(t, Toy)
	cases := []struct {
		name string
		lit  Literal
		want error
	}{
		{"K shares a prime with Q", Literal{LogNDB: 6, LogNQ: 5, Q: good.Q, K: good.Q[:1], LogScale: 12, Inner: 128}, ErrModulus},
		{"prime not 1 mod 2N", Literal{LogNDB: 6, LogNQ: 5, Q: []uint64{good.Q[0], 1048573}, K: good.K, LogScale: 12, Inner: 128}, ErrModulus},
		{"composite modulus", Literal{LogNDB: 6, LogNQ: 5, Q: []uint64{good.Q[0], 129 * 257}, K: good.K, LogScale: 12, Inner: 128}, ErrModulus},
		{"no K", Literal{LogNDB: 6, LogNQ: 5, LogQ: []int{20, 20}, LogScale: 12, Inner: 128}, ErrModulus},
		{"plaintext modulus too small", Literal{LogNDB: 6, LogNQ: 5, LogQ: []int{20, 20}, LogK: []int{20}, LogScale: 33, Inner: 128}, ErrPlainModulus},
		{"noise above Delta/2", Literal{LogNDB: 6, LogNQ: 5, LogQ: []int{20, 20}, LogK: []int{20}, LogScale: 6, Inner: 128}, ErrModulus},
		{"K too small for the noise", Literal{LogNDB: 6, LogNQ: 5, LogQ: []int{20, 20}, LogK: []int{8}, LogScale: 12, Inner: 128}, ErrModulus},
		{"inner not a multiple of N_q", Literal{LogNDB: 6, LogNQ: 5, LogQ: []int{20, 20}, LogK: []int{20}, LogScale: 12, Inner: 100}, nil},
	}
	for _, c := range cases {
		_, err := NewParams(c.lit)
		if err == nil || (c.want != nil && !errors.Is(err, c.want)) {
			t.Fatalf("%s: %v, want %v", c.name, err, c.want)
		}
		t.Logf("%s: %v", c.name, err)
	}

	// Operands made with other moduli are refused by the product.
	other := mustParams(t, Literal{LogNDB: 6, LogNQ: 5, LogQ: []int{21, 21}, LogK: []int{20, 20}, LogScale: 12, Inner: 128})
	rng := rand.New(rand.NewPCG(7, 1))
	sk, _ := good.GenSecrets(good.NDB)
	sko, _ := other.GenSecrets(other.NDB)
	mdb := irisLike(rng, good.NDB, 128)
	mq := irisLike(rng, 128, 2)
	db, _ := good.EncryptDB(sk, mdb)
	qo, _ := other.EncryptQuery(sko, mq)
	if _, err := good.Multiply(db, qo); !errors.Is(err, ErrModulus) {
		t.Fatalf("query of other moduli: %v, want ErrModulus", err)
	}
	// A database encrypted without the factor K (scale 1) is refused.
	q, _ := good.EncryptQuery(sk, mq)
	bad := *db
	enc := *db.Enc
	enc.Scale = big.NewInt(1)
	bad.Enc = &enc
	if _, err := good.Multiply(&bad, q); !errors.Is(err, ErrModulus) {
		t.Fatalf("database without the factor K: %v, want ErrModulus", err)
	}
	// A public key with the wrong number of query secrets is refused.
	pk, _ := good.GenQueryPublicKey(sk)
	pk.B = pk.B[:len(pk.B)-1]
	if _, err := good.EncryptQueryPK(pk, mq); !errors.Is(err, errs.ErrMismatch) {
		t.Fatalf("public key missing a block: %v, want ErrMismatch", err)
	}
	// Entries outside the declared bound are refused.
	mq.Data[0] = 2
	if _, err := good.EncryptQuery(sk, mq); err == nil {
		t.Fatal("query entry 2 with MaxAbsQuery 1: accepted")
	}
}
