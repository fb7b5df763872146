package irissetup

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"encmatch/core/base/errs"
	"encmatch/core/iris/ccmm"
	"encmatch/core/iris/internal/ccmmtest"
	"encmatch/core/iris/iriskeys"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/multiparty"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// runSetup runs a whole setup of cfg in files under root: each party's
// private directory (party-<i>/), one bulletin board (bulletin/), the
// Shamir shares delivered to each party's inbox (inbox-<i>/), the key set
// in keys/.
func runSetup(t *testing.T, cfg *Config, root string) {
	t.Helper()
	priv := func(i int) string { return filepath.Join(root, "party-"+string(rune('0'+i))) }
	inbox := func(i int) string { return filepath.Join(root, "inbox-"+string(rune('0'+i))) }
	bulletin := filepath.Join(root, "bulletin")
	for _, i := range cfg.parties() {
		if err := Round1(cfg, i, priv(i), bulletin); err != nil {
			t.Fatal(err)
		}
	}
	for _, from := range cfg.parties() { // the private delivery of the Shamir shares
		for _, to := range cfg.parties() {
			b, err := os.ReadFile(filepath.Join(priv(from), ShamirFile(from, to)))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(inbox(to), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(inbox(to), ShamirFile(from, to)), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, i := range cfg.parties() {
		if err := Round2(cfg, i, priv(i), bulletin, inbox(i)); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(priv(i), Round1StateFile(i))); !os.IsNotExist(err) {
			t.Fatalf("party %d's round-one state is still there: %v", i, err)
		}
	}
	if err := Finalize(cfg, bulletin, filepath.Join(root, "keys")); err != nil {
		t.Fatal(err)
	}
}

// TestSetupInFiles: three parties run the toy-threshold setup (t = 2, one
// database block) through files; the key set's directories load with
// package iriskeys; a database enrolled with the enroller's public key and
// the parties' EncS contributions (read from their party files), a query
// encrypted with the querier's key and the product half-bootstrapped with
// the server's keys decrypt, under the secret that parties 1 and 3
// rebuild from their Shamir shares, to every score in its slot; one
// party's share alone does not. No secret of the key set exists anywhere
// but as the parties' shares.
func TestSetupInFiles(t *testing.T) {
	cfg, err := NewConfig("toy-threshold", 0, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := WriteConfig(filepath.Join(root, ConfigFile), cfg); err != nil {
		t.Fatal(err)
	}
	if cfg, err = ReadConfig(filepath.Join(root, ConfigFile)); err != nil {
		t.Fatal(err)
	}
	runSetup(t, cfg, root)
	keys := filepath.Join(root, "keys")
	srv, err := iriskeys.LoadServer(filepath.Join(keys, iriskeys.ServerDir), 0)
	if err != nil {
		t.Fatal(err)
	}
	qr, err := iriskeys.LoadQuerier(filepath.Join(keys, iriskeys.QuerierDir))
	if err != nil {
		t.Fatal(err)
	}
	en, err := iriskeys.LoadEnroller(filepath.Join(keys, iriskeys.EnrollerDir))
	if err != nil {
		t.Fatal(err)
	}
	var parties []*Party
	for _, i := range cfg.parties() {
		party, err := LoadParty(cfg, i, filepath.Join(root, "party-"+string(rune('0'+i))))
		if err != nil {
			t.Fatal(err)
		}
		parties = append(parties, party)
	}
	p := srv.Params
	cp, sp := p.CCMM, p.Slots

	rng := rand.New(rand.NewPCG(11, 12))
	cols := 4
	mdb := ccmmtest.Codes(rng, cp.NDB, cp.Lit.Inner)
	mq := ccmmtest.Codes(rng, cp.Lit.Inner, cols)
	ccmmtest.Plant(mdb, mq, 5, 0, 0)
	ccmmtest.Plant(mdb, mq, 700, 2, 100)
	want, err := ccmm.MulInt(mdb, mq)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := cp.EncryptDBPK(en.DBKey, mdb)
	if err != nil {
		t.Fatal(err)
	}
	var contributions []*ccmm.SharedA
	for _, party := range parties {
		c, err := cp.EncSShare(en.DBKey, enc, party.Query)
		if err != nil {
			t.Fatal(err)
		}
		contributions = append(contributions, c)
	}
	encS, err := cp.CombineEncS(contributions)
	if err != nil {
		t.Fatal(err)
	}
	qct, err := cp.EncryptQueryPK(qr.PublicKey, mq)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cp.Multiply(&ccmm.DB{Enc: enc, EncS: encS}, qct)
	if err != nil {
		t.Fatal(err)
	}
	srv.Keys.Blocks = en.Blocks
	lifted, err := sp.Lift(res, 0)
	if err != nil {
		t.Fatal(err)
	}
	evals, err := sp.NewEvaluators(srv.Keys)
	if err != nil {
		t.Fatal(err)
	}
	sets, err := sp.ToSlots(evals[:1], [][]*rlwe.Ciphertext{lifted})
	if err != nil {
		t.Fatal(err)
	}

	bp := sp.Bootstrap.BootstrappingParameters
	worst := func(sk *rlwe.SecretKey) float64 {
		unit := math.Ldexp(1, -sp.Lit.ScoreBits)
		w := 0.0
		dec, ecd := rlwe.NewDecryptor(bp, sk), ckks.NewEncoder(bp)
		for s, ct := range sets[0] {
			vals := make([]complex128, ct.Slots())
			if err := ecd.Decode(dec.DecryptNew(ct), vals); err != nil {
				t.Fatal(err)
			}
			for i, v := range vals {
				input, row := sp.SlotOf(s, i)
				w = math.Max(w, math.Abs(real(v)-float64(want.At(row, input))*unit))
			}
		}
		return w / unit
	}
	active := []multiparty.ShamirPublicPoint{1, 3}
	secret := rlwe.NewSecretKey(bp)
	for _, i := range []int{0, 2} {
		own := multiparty.ShamirPublicPoint(parties[i].ID)
		add := rlwe.NewSecretKey(bp)
		if err := multiparty.NewCombiner(bp, own, active, cfg.Threshold).GenAdditiveShare(active, own, parties[i].Shamir, add); err != nil {
			t.Fatal(err)
		}
		bp.RingQP().Add(secret.Value, add.Value, secret.Value)
	}
	got := worst(secret)
	t.Logf("three parties' keys from files, parties 1 and 3 decrypting: largest slot error %.3g score units", got)
	if got > 0.5 {
		t.Fatalf("slots are off by %.3g score units", got)
	}
	alone := rlwe.NewSecretKey(bp)
	bp.RingQP().Add(alone.Value, parties[0].Shamir.Poly, alone.Value)
	if w := worst(alone); w < 1 {
		t.Fatalf("one party's Shamir share alone decrypts (largest slot error %.3g score units)", w)
	}
}

// TestSetupRefusals: a single holder's preset, a threshold outside 1..n,
// no blocks, a party number outside 1..n are refused; iriskeys refuses
// to make a threshold preset's keys alone; a round-one message copied
// under another party's name stops the finalisation.
func TestSetupRefusals(t *testing.T) {
	for _, c := range []struct {
		preset    string
		t, blocks int
	}{{"toy", 1, 1}, {"toy-threshold", 0, 1}, {"toy-threshold", 4, 1}, {"toy-threshold", 2, 0}, {"toy-threshold", 2, iriskeys.MaxBlocks + 1}} {
		if _, err := NewConfig(c.preset, 0, c.t, c.blocks); !errors.Is(err, errs.ErrInvalid) {
			t.Fatalf("%+v: %v, want ErrInvalid", c, err)
		}
	}
	if _, err := iriskeys.Generate(t.TempDir(), "toy-threshold", 0); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("one holder's keys at a threshold preset: %v", err)
	}
	cfg, err := NewConfig("toy-threshold", 0, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := Round1(cfg, 4, root, root); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("party 4 of 3: %v", err)
	}
	bulletin := filepath.Join(root, "bulletin")
	if err := Round1(cfg, 1, filepath.Join(root, "p"), bulletin); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(bulletin, Round1File(1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bulletin, Round1File(2)), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Round2(cfg, 1, filepath.Join(root, "p"), bulletin, filepath.Join(root, "p")); !errors.Is(err, errs.ErrMismatch) {
		t.Fatalf("party 1's round-one message as party 2's: %v", err)
	}
}
