package irissetup_test

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
	"encmatch/core/iris/internal/setuptest"
	"encmatch/core/iris/iriskeys"
	"encmatch/core/iris/irissetup"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

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
	cfg, err := irissetup.NewConfig("toy-threshold", 0, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := irissetup.WriteConfig(filepath.Join(root, irissetup.ConfigFile), cfg); err != nil {
		t.Fatal(err)
	}
	if cfg, err = irissetup.ReadConfig(filepath.Join(root, irissetup.ConfigFile)); err != nil {
		t.Fatal(err)
	}
	setup := setuptest.Run(t, cfg, root)
	keys := setup.Keys
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
	parties := setup.Parties
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
	secret := setup.Secret(t, bp, 1, 3)
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
		if _, err := irissetup.NewConfig(c.preset, 0, c.t, c.blocks); !errors.Is(err, errs.ErrInvalid) {
			t.Fatalf("%+v: %v, want ErrInvalid", c, err)
		}
	}
	if _, err := iriskeys.Generate(t.TempDir(), "toy-threshold", 0); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("one holder's keys at a threshold preset: %v", err)
	}
	cfg, err := irissetup.NewConfig("toy-threshold", 0, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := irissetup.Round1(cfg, 4, root, root); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("party 4 of 3: %v", err)
	}
	bulletin := filepath.Join(root, "bulletin")
	if err := irissetup.Round1(cfg, 1, filepath.Join(root, "p"), bulletin); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(bulletin, irissetup.Round1File(1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bulletin, irissetup.Round1File(2)), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := irissetup.Round2(cfg, 1, filepath.Join(root, "p"), bulletin, filepath.Join(root, "p")); !errors.Is(err, errs.ErrMismatch) {
		t.Fatalf("party 1's round-one message as party 2's: %v", err)
	}
}
