package threshold

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"encmatch/core/base/errs"
	"encmatch/core/base/params"
	"encmatch/core/face/keys"
	"encmatch/core/face/result"
	"encmatch/core/face/strategy"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
	"github.com/tuneinsight/lattigo/v6/utils/sampling"
)

// fixture is a finished t-out-of-n setup in a temporary directory.
type fixture struct {
	cfg       *Config
	set       *params.Set
	dir       string
	serverDir string
	shares    []*Share // shares[i] is party i+1's
	receiver  *Receiver
	recvPub   *ReceiverPublic
	signer    *SigningKey    // the server's signing key
	server    *SigningPublic // its public key, which the decryptors trust
}

// newFixture runs every round of a t-out-of-n setup with the dg strategy of
// dimension dim at preset, each party with its own private directory, in a
// temporary directory of tb.
func newFixture(tb testing.TB, preset string, kappa, dim, n, t int) *fixture {
	tb.Helper()
	return newFixtureIn(tb, tb.TempDir(), preset, kappa, dim, n, t)
}

// shared is the 2-out-of-3 toy setup that most tests use, made once per
// test process in a directory that TestMain removes.
var shared struct {
	once sync.Once
	dir  string
	f    *fixture
}

// sharedFixture returns the shared 2-out-of-3 toy setup.
func sharedFixture(tb testing.TB) *fixture {
	tb.Helper()
	shared.once.Do(func() {
		dir, err := os.MkdirTemp("", "threshold-test-*")
		if err != nil {
			tb.Fatal(err)
		}
		shared.dir = dir
		shared.f = newFixtureIn(tb, dir, params.Toy, params.MinKappa, 4, 3, 2)
	})
	if shared.f == nil {
		tb.Fatal("the shared 2-out-of-3 setup failed")
	}
	return shared.f
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

// newFixtureIn is newFixture in directory dir.
func newFixtureIn(tb testing.TB, dir, preset string, kappa, dim, n, t int) *fixture {
	tb.Helper()
	set, err := params.New(preset, kappa, dim)
	if err != nil {
		tb.Fatal(err)
	}
	return newFixtureOf(tb, dir, set, n, t)
}

// newFixtureOf runs a t-out-of-n setup of set (diagonal strategy) in dir.
func newFixtureOf(tb testing.TB, dir string, set *params.Set, n, t int) *fixture {
	tb.Helper()
	strat, err := strategy.New(strategy.DG, 0, set.L())
	if err != nil {
		tb.Fatal(err)
	}
	cfg, err := NewConfig(set, &strat, nil, n, t)
	if err != nil {
		tb.Fatal(err)
	}
	f := &fixture{cfg: cfg, set: set, dir: dir}
	bulletin, mail := filepath.Join(f.dir, "bulletin"), filepath.Join(f.dir, "mail")
	for _, d := range []string{bulletin, mail} {
		if err := os.Mkdir(d, 0o700); err != nil {
			tb.Fatal(err)
		}
	}
	priv := func(id int) string { return filepath.Join(f.dir, fmt.Sprintf("party-%d", id)) }
	for _, id := range cfg.allParties() {
		if err := os.Mkdir(priv(id), 0o700); err != nil {
			tb.Fatal(err)
		}
		if err := Round1(cfg, set, id, priv(id), bulletin); err != nil {
			tb.Fatalf("round 1 of party %d: %v", id, err)
		}
		for _, j := range cfg.allParties() { // deliver the Shamir shares
			if err := os.Rename(filepath.Join(priv(id), ShamirFile(id, j)), filepath.Join(mail, ShamirFile(id, j))); err != nil {
				tb.Fatal(err)
			}
		}
	}
	for _, id := range cfg.allParties() {
		if err := Round2(cfg, set, id, priv(id), bulletin, mail); err != nil {
			tb.Fatalf("round 2 of party %d: %v", id, err)
		}
		s, err := LoadShare(filepath.Join(priv(id), ShareFile(id)))
		if err != nil {
			tb.Fatal(err)
		}
		f.shares = append(f.shares, s)
	}
	f.serverDir = filepath.Join(f.dir, "server")
	if err := Finalize(cfg, set, bulletin, f.serverDir); err != nil {
		tb.Fatal(err)
	}
	recvDir := filepath.Join(f.dir, "receiver")
	if err := GenerateReceiver(cfg, set, recvDir); err != nil {
		tb.Fatal(err)
	}
	if f.receiver, err = LoadReceiver(recvDir); err != nil {
		tb.Fatal(err)
	}
	if f.recvPub, err = LoadReceiverPublic(ReceiverPublicFile(recvDir)); err != nil {
		tb.Fatal(err)
	}
	signDir := filepath.Join(f.dir, "signing")
	if f.server, err = GenerateSigningKey(signDir); err != nil {
		tb.Fatal(err)
	}
	if f.signer, err = LoadSigningKey(filepath.Join(signDir, SigningKeyFile)); err != nil {
		tb.Fatal(err)
	}
	return f
}

// randomRows draws rows of values in [-1, 1].
func randomRows(rows, cols int, seed uint64) [][]float64 {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([][]float64, rows)
	for i := range out {
		out[i] = make([]float64, cols)
		for j := range out[i] {
			out[i][j] = 2*r.Float64() - 1
		}
	}
	return out
}

// encrypt encrypts rows under the fixture's collective public key.
func (f *fixture) encrypt(tb testing.TB, rows [][]float64) *Input {
	tb.Helper()
	pub, err := keys.LoadPublic(f.serverDir)
	if err != nil {
		tb.Fatal(err)
	}
	data, err := Encrypt(pub, rows)
	if err != nil {
		tb.Fatal(err)
	}
	in, err := DecodeInput(data, f.cfg, f.set)
	if err != nil {
		tb.Fatal(err)
	}
	return in
}

// query encrypts a probe as a querier does: one ciphertext at the top level
// under the collective public key, framed as a query.
func (f *fixture) query(tb testing.TB, probe []float64) (*rlwe.Ciphertext, []byte) {
	tb.Helper()
	ct := f.encrypt(tb, [][]float64{probe}).Ciphertexts[0]
	data, err := result.MarshalQuery(f.cfg.header(""), ct)
	if err != nil {
		tb.Fatal(err)
	}
	return ct, data
}

// resultOf frames ciphertexts as an identification result, one group of
// all slots per ciphertext, after dropping them to level 0 (the result
// level).
func (f *fixture) resultOf(tb testing.TB, cts ...*rlwe.Ciphertext) []byte {
	tb.Helper()
	slots := f.set.Slots()
	r := &result.Result{Header: result.Header{Mode: result.Identification, Total: slots * len(cts)}}
	eval := ckks.NewEvaluator(f.set.CKKS, nil)
	for i, ct := range cts {
		ct = ct.CopyNew()
		eval.DropLevel(ct, ct.Level())
		r.Spans = append(r.Spans, result.Span{Start: i * slots, Count: slots})
		r.Ciphertexts = append(r.Ciphertexts, ct)
	}
	data, err := result.Marshal(f.cfg.header(""), r)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// bind binds a result to its query and decodes the bound search.
func (f *fixture) bind(tb testing.TB, query, res []byte) (*Input, []byte) {
	tb.Helper()
	data, _, err := BindSearch(f.signer, &f.cfg.Meta, f.set, query, res, "test-index", 3)
	if err != nil {
		tb.Fatal(err)
	}
	in, err := DecodeInput(data, f.cfg, f.set)
	if err != nil {
		tb.Fatal(err)
	}
	return in, data
}

// search makes a bound search whose result holds rows (one level-0
// ciphertext per row) for a fresh query.
func (f *fixture) search(tb testing.TB, rows [][]float64) *Input {
	tb.Helper()
	_, q := f.query(tb, randomRows(1, 4, 99)[0])
	in, _ := f.bind(tb, q, f.resultOf(tb, f.encrypt(tb, rows).Ciphertexts...))
	return in
}

// rawShares has each participant make its decryption share of in with no
// check of the input's kind and no journal (tests of the receiver only).
func (f *fixture) rawShares(tb testing.TB, in *Input, parties []int) [][]byte {
	tb.Helper()
	var out [][]byte
	for _, id := range parties {
		b, _, err := f.shares[id-1].makeShare(in, parties, f.recvPub, FloodOptions{})
		if err != nil {
			tb.Fatalf("decryption share of party %d: %v", id, err)
		}
		out = append(out, b)
	}
	return out
}

// decryptShares has each participant make its decryption share of in.
func (f *fixture) decryptShares(tb testing.TB, in *Input, parties []int) [][]byte {
	tb.Helper()
	var out [][]byte
	for _, id := range parties {
		b, _, err := f.shares[id-1].Decrypt(in, parties, f.recvPub, f.server, FloodOptions{})
		if err != nil {
			tb.Fatalf("decryption share of party %d: %v", id, err)
		}
		out = append(out, b)
	}
	return out
}

// checkClose compares decrypted rows with the expected values.
func checkClose(tb testing.TB, got, want [][]float64, tol float64) {
	tb.Helper()
	for i := range want {
		for j := range want[i] {
			if d := math.Abs(got[i][j] - want[i][j]); d > tol {
				tb.Fatalf("row %d slot %d: decrypted %v, expected %v (error %.3g > %.3g)", i, j, got[i][j], want[i][j], d, tol)
			}
		}
	}
}

// subsets lists the k-subsets of 1..n.
func subsets(n, k int) [][]int {
	if k == 0 {
		return [][]int{{}}
	}
	var out [][]int
	for last := k; last <= n; last++ {
		for _, s := range subsets(last-1, k-1) {
			out = append(out, append(append([]int{}, s...), last))
		}
	}
	return out
}

func TestThresholdDecryptAnyTParties(t *testing.T) {
	for _, c := range []struct{ t, n int }{{2, 3}, {3, 5}} {
		t.Run(fmt.Sprintf("%d-of-%d", c.t, c.n), func(t *testing.T) {
			f := sharedFixture(t)
			if c.n != 3 || c.t != 2 {
				f = newFixture(t, params.Toy, params.MinKappa, 4, c.n, c.t)
			}
			rows := randomRows(2, 64, 1)
			tol := math.Exp2(-DefaultPrecisionBits)
			for _, parties := range subsets(c.n, c.t) {
				in := f.search(t, rows)
				got, info, err := f.receiver.Combine(in, f.decryptShares(t, in, parties))
				if err != nil {
					t.Fatalf("parties %v: %v", parties, err)
				}
				if len(info.Flooding) != c.t || info.Flooding[0].Bits < 20 {
					t.Fatalf("parties %v: flooding %+v", parties, info.Flooding)
				}
				checkClose(t, got, rows, tol)
			}
			in := f.search(t, rows)
			shares := f.decryptShares(t, in, subsets(c.n, c.t)[0])
			_, _, err := f.receiver.Combine(in, shares[:c.t-1])
			if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "missing parties") {
				t.Fatalf("t-1 shares: got %v, want an invalid-argument error naming the missing parties", err)
			}
		})
	}
}

func TestThresholdEvaluatedCiphertext(t *testing.T) {
	f := sharedFixture(t)
	ev, err := keys.LoadEvaluation(f.serverDir)
	if err != nil {
		t.Fatalf("the server cannot load the collective keys: %v", err)
	}
	rows := randomRows(1, f.set.Slots(), 2)
	ct, want := f.evaluate(t, ev, f.encrypt(t, rows), rows[0])
	_, q := f.query(t, rows[0][:4])
	evIn, _ := f.bind(t, q, f.resultOf(t, ct))
	got, _, err := f.receiver.Combine(evIn, f.decryptShares(t, evIn, []int{1, 3}))
	if err != nil {
		t.Fatal(err)
	}
	checkClose(t, got, [][]float64{want}, math.Exp2(-DefaultPrecisionBits))
}

// evaluate squares the first ciphertext of in (relinearisation key) and
// rotates it by one slot (Galois key), and returns the expected values.
func (f *fixture) evaluate(tb testing.TB, ev *keys.Evaluation, in *Input, x []float64) (*rlwe.Ciphertext, []float64) {
	tb.Helper()
	eval := ckks.NewEvaluator(f.set.CKKS, ev.Keys)
	ct, err := eval.MulRelinNew(in.Ciphertexts[0], in.Ciphertexts[0])
	if err != nil {
		tb.Fatal(err)
	}
	if err := eval.Rescale(ct, ct); err != nil {
		tb.Fatal(err)
	}
	if ct, err = eval.RotateNew(ct, 1); err != nil {
		tb.Fatal(err)
	}
	twice := 1.0
	if f.set.Fold { // the folded scores' real part, as the engine takes it: z + conj(z)
		conj, err := eval.ConjugateNew(ct)
		if err != nil {
			tb.Fatal(err)
		}
		if err := eval.Add(ct, conj, ct); err != nil {
			tb.Fatal(err)
		}
		twice = 2
	}
	want := make([]float64, len(x))
	for i := range want {
		v := x[(i+1)%len(x)]
		want[i] = twice * v * v
	}
	return ct, want
}

func TestThresholdFloodingAndRefusals(t *testing.T) {
	f := sharedFixture(t)
	in := f.search(t, randomRows(1, 16, 3))
	a := f.decryptShares(t, in, []int{1, 2})
	b := f.rawShares(t, in, []int{1, 2})
	if bytes.Equal(a[0], b[0]) {
		t.Fatal("two decryption shares of the same ciphertext are equal: no fresh flooding noise")
	}
	other := f.search(t, randomRows(1, 16, 4))
	wrongCt := f.decryptShares(t, other, []int{1, 2})
	corrupt := bytes.Clone(a[1])
	corrupt[len(corrupt)/2] ^= 1
	cases := []struct {
		name   string
		shares [][]byte
		kind   error
		text   string
	}{
		{"no shares", nil, errs.ErrInvalid, "no decryption share given"},
		{"duplicate party", [][]byte{a[0], b[0]}, errs.ErrInvalid, "two decryption shares from party 1"},
		{"another ciphertext", [][]byte{a[0], wrongCt[1]}, errs.ErrMismatch, "another ciphertext"},
		{"corrupt", [][]byte{a[0], corrupt}, errs.ErrCorrupt, "checksum"},
		{"other participants", [][]byte{a[0], f.rawShares(t, in, []int{2, 3})[0]}, errs.ErrMismatch, "different participant sets"},
	}
	for _, c := range cases {
		_, _, err := f.receiver.Combine(in, c.shares)
		if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.text) {
			t.Errorf("%s: got %v, want %v mentioning %q", c.name, err, c.kind, c.text)
		}
	}
	if _, _, err := f.shares[0].Decrypt(in, []int{1}, f.recvPub, f.server, FloodOptions{}); !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("t-1 participants: got %v, want an invalid-argument error", err)
	}
	if _, _, err := f.shares[0].Decrypt(in, []int{2, 3}, f.recvPub, f.server, FloodOptions{}); !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("decryptor not among the participants: got %v, want an invalid-argument error", err)
	}
	if _, _, err := f.shares[0].Decrypt(in, []int{1, 2}, f.recvPub, f.server, FloodOptions{Bits: 60}); !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("flooding larger than the scale: got %v, want an invalid-argument error", err)
	}
}

func TestThresholdOtherKeySetRefused(t *testing.T) {
	f := sharedFixture(t)
	g := newFixture(t, params.Toy, params.MinKappa, 4, 2, 2)
	in := f.search(t, randomRows(1, 8, 5))
	if _, err := DecodeInput(g.encryptBytes(t), f.cfg, f.set); !errors.Is(err, errs.ErrMismatch) {
		t.Errorf("ciphertext of another key set: got %v, want a mismatch", err)
	}
	if _, _, err := f.shares[0].Decrypt(in, []int{1, 2}, g.recvPub, f.server, FloodOptions{}); !errors.Is(err, errs.ErrMismatch) {
		t.Errorf("receiver of another key set: got %v, want a mismatch", err)
	}
	gIn := g.search(t, randomRows(1, 8, 6))
	share, _, err := g.shares[0].Decrypt(gIn, []int{1, 2}, g.recvPub, g.server, FloodOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.receiver.Combine(in, [][]byte{f.decryptShares(t, in, []int{1, 2})[0], share}); !errors.Is(err, errs.ErrMismatch) {
		t.Errorf("share of another key set: got %v, want a mismatch", err)
	}
}

// encryptBytes encrypts one row under the fixture's key set.
func (f *fixture) encryptBytes(tb testing.TB) []byte {
	pub, err := keys.LoadPublic(f.serverDir)
	if err != nil {
		tb.Fatal(err)
	}
	data, err := Encrypt(pub, [][]float64{{1}})
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// collectiveSecret reconstructs s = sum s_i from t Shamir shares (tests
// only: no party ever does this).
func (f *fixture) collectiveSecret(tb testing.TB) *rlwe.SecretKey {
	p := *f.set.CKKS.GetRLWEParameters()
	parties := f.cfg.allParties()[:f.cfg.Threshold]
	sk := rlwe.NewSecretKey(p)
	for _, id := range parties {
		a, err := f.shares[id-1].additiveShare(parties)
		if err != nil {
			tb.Fatal(err)
		}
		p.RingQP().Add(sk.Value, a.Value, sk.Value)
	}
	return sk
}

// noiseBits measures log2 ||c0 + c1 s - Encode(want)||_inf.
func (f *fixture) noiseBits(sk *rlwe.SecretKey, ct *rlwe.Ciphertext, want []float64) float64 {
	p := f.set.CKKS
	pt := rlwe.NewDecryptor(p, sk).DecryptNew(ct)
	ideal := ckks.NewPlaintext(p, ct.Level())
	ideal.Scale = ct.Scale
	if err := ckks.NewEncoder(p).Encode(want, ideal); err != nil {
		panic(err)
	}
	rq := p.RingQ().AtLevel(ct.Level())
	rq.Sub(pt.Value, ideal.Value, pt.Value)
	rq.INTT(pt.Value, pt.Value)
	coeffs := make([]int64, p.N())
	q := rq.SubRings[0].Modulus
	var worst float64
	for i, c := range pt.Value.Coeffs[0] {
		coeffs[i] = int64(c)
		if c > q/2 {
			coeffs[i] = int64(c) - int64(q)
		}
		worst = math.Max(worst, math.Abs(float64(coeffs[i])))
	}
	return math.Log2(worst)
}

// measureNoise logs log2 B_e of a fresh and of an evaluated ciphertext
// under the collective key and checks both stay below DefaultNoiseBits.
func measureNoise(t *testing.T, f *fixture) {
	sk := f.collectiveSecret(t)
	rows := randomRows(1, f.set.Slots(), 7)
	in := f.encrypt(t, rows)
	ev, err := keys.LoadEvaluation(f.serverDir)
	if err != nil {
		t.Fatal(err)
	}
	ct, want := f.evaluate(t, ev, in, rows[0])
	fresh, evaluated := f.noiseBits(sk, in.Ciphertexts[0], rows[0]), f.noiseBits(sk, ct, want)
	what := "product + rotation"
	if f.set.Fold {
		what += " + real part"
	}
	t.Logf("log2 B_e at %s: fresh %.1f, %s %.1f (default stated bound %d)", f.set.Label(), fresh, what, evaluated, DefaultNoiseBits)
	if fresh > DefaultNoiseBits || evaluated > DefaultNoiseBits {
		t.Errorf("measured noise above DefaultNoiseBits")
	}
}

// TestCiphertextNoise measures the noise bound B_e under the collective key
// (docs/THRESHOLD.md).
func TestCiphertextNoise(t *testing.T) {
	measureNoise(t, sharedFixture(t))
}

// TestFoldedKeySet: a folded set's setup carries the fold and the collective
// conjugation key; a product, a rotation and the real part (z + conj(z), the
// engine's step for folded scores) stay under the stated noise bound, and t
// decryptors recover the values.
func TestFoldedKeySet(t *testing.T) {
	set, err := params.New(params.Toy, params.MinKappa, 8)
	if err == nil {
		set, err = set.WithFold(true)
	}
	if err != nil {
		t.Fatal(err)
	}
	f := newFixtureOf(t, t.TempDir(), set, 3, 2)
	conj := set.CKKS.GaloisElementOrderTwoOrthogonalSubgroup()
	if !f.cfg.Meta.Fold || !slices.Contains(f.cfg.GaloisElements, conj) {
		t.Fatalf("folded setup: fold %v, Galois elements %v (conjugation %d)", f.cfg.Meta.Fold, f.cfg.GaloisElements, conj)
	}
	ev, err := keys.LoadEvaluation(f.serverDir)
	if err != nil {
		t.Fatal(err)
	}
	if !ev.Meta.Fold || ev.Params.Fingerprint() != set.Fingerprint() {
		t.Fatalf("server keys for %s (fold %v), want %s", ev.Params.Label(), ev.Meta.Fold, set.Label())
	}
	measureNoise(t, f)
	rows := randomRows(1, set.Slots(), 11)
	ct, want := f.evaluate(t, ev, f.encrypt(t, rows), rows[0])
	_, q := f.query(t, rows[0][:4])
	in, _ := f.bind(t, q, f.resultOf(t, ct))
	got, _, err := f.receiver.Combine(in, f.decryptShares(t, in, []int{1, 3}))
	if err != nil {
		t.Fatal(err)
	}
	checkClose(t, got, [][]float64{want}, math.Exp2(-DefaultPrecisionBits))
}

func TestPlanFlooding(t *testing.T) {
	f, err := PlanFlooding(15, 45, 3, FloodOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if f.Bits != f.MaxBits || f.SecureBits != 64+15+DefaultNoiseBits {
		t.Fatalf("default plan %+v: want the cap (the secure size does not fit)", f)
	}
	g, err := PlanFlooding(15, 120, 3, FloodOptions{NoiseBits: 10})
	if err != nil || g.Bits != 89 || g.HidingBits != Lambda {
		t.Fatalf("plan at scale 2^120: %+v, %v: want the secure size 2^89 and %d hiding bits", g, err, Lambda)
	}
	if _, err := PlanFlooding(15, 45, 3, FloodOptions{Bits: 40}); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("flooding above the cap: got %v, want an invalid-argument error", err)
	}
}

// TestFloodingSampler checks that Lattigo's sampler draws the planned
// standard deviation at these sizes.
func TestFloodingSampler(t *testing.T) {
	set, err := params.New(params.Toy, params.MinKappa, 4)
	if err != nil {
		t.Fatal(err)
	}
	p := set.CKKS
	sigma := math.Exp2(30)
	prng, err := sampling.NewPRNG()
	if err != nil {
		t.Fatal(err)
	}
	s, err := ring.NewSampler(prng, p.RingQ().AtLevel(0), ring.DiscreteGaussian{Sigma: sigma, Bound: 6 * sigma}, false)
	if err != nil {
		t.Fatal(err)
	}
	poly := p.RingQ().AtLevel(0).NewPoly()
	s.Read(poly)
	q := p.Q()[0]
	var sum2 float64
	for _, c := range poly.Coeffs[0] {
		v := float64(c)
		if c > q/2 {
			v = -float64(q - c)
		}
		sum2 += v * v
	}
	got := math.Sqrt(sum2 / float64(p.N()))
	if got < 0.9*sigma || got > 1.1*sigma {
		t.Fatalf("sampled standard deviation 2^%.2f, planned 2^30", math.Log2(got))
	}
}

// TestSecurePreset runs a 2-out-of-3 setup and decryption at the secure
// default preset, plain and folded (skipped with -short), and measures the
// noise there.
func TestSecurePreset(t *testing.T) {
	if testing.Short() {
		t.Skip("secure preset: skipped with -short")
	}
	for _, fold := range []bool{false, true} {
		set, err := params.New(params.Default, params.MinKappa, 4)
		if err == nil {
			set, err = set.WithFold(fold)
		}
		if err != nil {
			t.Fatal(err)
		}
		f := newFixtureOf(t, t.TempDir(), set, 3, 2)
		rows := randomRows(1, f.set.Slots(), 8)
		in := f.search(t, rows)
		got, info, err := f.receiver.Combine(in, f.decryptShares(t, in, []int{2, 3}))
		if err != nil {
			t.Fatal(err)
		}
		checkClose(t, got, rows, math.Exp2(-DefaultPrecisionBits))
		var worst float64
		for j, v := range rows[0] {
			worst = math.Max(worst, math.Abs(got[0][j]-v))
		}
		t.Logf("%s: flooding %+v; largest decoded error 2^%.1f", f.set.Label(), info.Flooding[0], math.Log2(worst))
		measureNoise(t, f)
	}
}

// TestThresholdDecryptResult decrypts an encmatch result (kind "result",
// level 0, as the server returns) bound to its query, and checks that an
// unbound result is refused.
func TestThresholdDecryptResult(t *testing.T) {
	f := sharedFixture(t)
	bits := make([]float64, 32)
	for i := range bits {
		bits[i] = float64(i % 3 % 2)
	}
	in := f.encrypt(t, [][]float64{bits})
	ct := in.Ciphertexts[0]
	ckks.NewEvaluator(f.set.CKKS, nil).DropLevel(ct, ct.Level())
	r := &result.Result{Header: result.Header{Mode: result.Identification, Total: len(bits),
		Spans: []result.Span{{Start: 0, Count: len(bits)}}}, Ciphertexts: []*rlwe.Ciphertext{ct}}
	data, err := result.Marshal(f.cfg.header(""), r)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := DecodeInput(data, f.cfg, f.set)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.shares[1].Decrypt(plain, []int{2, 3}, f.recvPub, f.server, FloodOptions{}); !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), KindSearch) {
		t.Fatalf("unbound result: got %v, want an invalid-argument error asking for a %s", err, KindSearch)
	}
	_, q := f.query(t, bits[:4])
	resIn, _ := f.bind(t, q, data)
	got, info, err := f.receiver.Combine(resIn, f.decryptShares(t, resIn, []int{2, 3}))
	if err != nil {
		t.Fatal(err)
	}
	if resIn.Kind != KindSearch || resIn.Ciphertexts[0].Level() != 0 || resIn.Result == nil {
		t.Fatalf("decoded a %s at level %d, want a bound result at level 0", resIn.Kind, resIn.Ciphertexts[0].Level())
	}
	checkClose(t, got, [][]float64{bits}, math.Exp2(-DefaultPrecisionBits))
	answer, err := resIn.Result.Read(got)
	if err != nil || len(answer.Matches) != 11 {
		t.Fatalf("answer %+v, %v: want the 11 positions holding 1", answer, err)
	}
	t.Logf("level-0 result: flooding %+v", info.Flooding[0])
}

// TestSecretIsUniformTernary checks what docs/THRESHOLD.md says of the
// secrets: each party's s_i is drawn from Lattigo's default uniform
// ternary distribution (each coefficient -1, 0 or 1 with probability 1/3,
// no fixed Hamming weight), so the collective s = s_1 + ... + s_n has
// coefficients in [-n, n], 20/27 of them non-zero at n = 3.
func TestSecretIsUniformTernary(t *testing.T) {
	f := sharedFixture(t)
	p := *f.set.CKKS.GetRLWEParameters()
	if p.Xs() != rlwe.DefaultXs || rlwe.DefaultXs != (ring.Ternary{P: 2 / 3.0}) {
		t.Fatalf("secret distribution %+v, want the uniform ternary ring.Ternary{P: 2/3}", p.Xs())
	}
	sk := f.collectiveSecret(t)
	rq := p.RingQ().AtLevel(0)
	s := rq.NewPoly()
	s.Copy(sk.Value.Q)
	rq.IMForm(s, s)
	rq.INTT(s, s)
	q := rq.SubRings[0].Modulus
	nonzero, largest := 0, 0
	for _, c := range s.Coeffs[0] {
		v := int(c)
		if c > q/2 {
			v = -int(q - c)
		}
		if v != 0 {
			nonzero++
		}
		largest = max(largest, v, -v)
	}
	frac := float64(nonzero) / float64(p.N())
	t.Logf("collective secret of n=%d parties: %d of %d coefficients non-zero (%.3f, uniform ternary gives 20/27 = %.3f), largest |s_j| = %d",
		f.cfg.Parties, nonzero, p.N(), frac, 20/27.0, largest)
	if largest > f.cfg.Parties || math.Abs(frac-20/27.0) > 0.03 {
		t.Fatalf("collective secret: %.3f non-zero, largest %d: not a sum of %d uniform ternary secrets", frac, largest, f.cfg.Parties)
	}
}

// TestConfigRefusesTheRealRing: the flooding is measured on the standard
// ring only, so a threshold setup on a conjugate-invariant preset is refused.
func TestConfigRefusesTheRealRing(t *testing.T) {
	set, err := params.New(params.ToyReal, params.MinKappa, 4)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewConfig(set, nil, nil, 3, 2); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("threshold setup on %s: got %v, want an invalid-argument error", set.Preset, err)
	}
}
