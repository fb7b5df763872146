package irisquery

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"encmatch/core/base/errs"
	"encmatch/core/iris/internal/setuptest"
	"encmatch/core/iris/irisdb"
	"encmatch/core/iris/iriskeys"
	"encmatch/core/iris/irissetup"
)

// TestThresholdFilesEndToEnd runs the threshold system's roles through
// their files at the toy-threshold preset, with no key holder anywhere:
// three parties' setup (t = 2, two blocks); a public enrollment of 1,100
// codes (two blocks) by the enroller, the three parties' EncS
// contributions and their completion; a public-key query of 3 eyes x 3
// rotations (one eye enrolled, a quarter of its bits flipped); the
// server's match; decryption under the secret that parties 2 and 3
// rebuild from their Shamir shares, equal to the plaintext model's bits.
// A duplicated contribution, one made from another enc.bin and a database
// loaded before its completion are refused.
func TestThresholdFilesEndToEnd(t *testing.T) {
	cfg, err := irissetup.NewConfig("toy-threshold", 0, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	setup := setuptest.Run(t, cfg, t.TempDir())
	en, err := iriskeys.LoadEnroller(filepath.Join(setup.Keys, iriskeys.EnrollerDir))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(15, 16))
	const rotations, eyes, thr = 3, 3, 0.34
	l := en.Params.CCMM.Lit.Inner
	gallery := randomCodes(rng, 1100, l)
	q := randomCodes(rng, eyes*rotations, l)
	plantMatch(rng, q, 1*rotations+2, gallery, 1030)
	want := modelBits(gallery, q, rotations, thr)
	if !want[1] || want[0] || want[2] {
		t.Fatalf("model bits %v, want [false true false]", want)
	}

	dbDir := filepath.Join(setup.Root, "db")
	if _, err := irisdb.EnrollPublic(en, dbDir, gallery, thr); err != nil {
		t.Fatal(err)
	}
	var contributions []string
	for i, party := range setup.Parties {
		out := filepath.Join(setup.PartyDir(i+1), "encs-contribution.bin")
		if err := irisdb.ContributeEncS(en, dbDir, party.ID, party.Query, out); err != nil {
			t.Fatal(err)
		}
		contributions = append(contributions, out)
	}
	if _, err := irisdb.CompleteEnrollment(en, dbDir, []string{contributions[0], contributions[0], contributions[1]}); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("a contribution given twice: %v", err)
	}
	other := filepath.Join(setup.Root, "other-db")
	if _, err := irisdb.EnrollPublic(en, other, randomCodes(rng, 10, l), thr); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(setup.Root, "stale.bin")
	if err := irisdb.ContributeEncS(en, other, 3, setup.Parties[2].Query, stale); err != nil {
		t.Fatal(err)
	}
	if _, err := irisdb.CompleteEnrollment(en, dbDir, []string{contributions[0], contributions[1], stale}); !errors.Is(err, errs.ErrMismatch) {
		t.Fatalf("a contribution made from another enc.bin: %v", err)
	}
	server, err := iriskeys.LoadServer(filepath.Join(setup.Keys, iriskeys.ServerDir), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := irisdb.Load(server, dbDir); err == nil {
		t.Fatal("a database loaded before its EncS was complete")
	}
	if _, err := irisdb.CompleteEnrollment(en, dbDir, contributions); err != nil {
		t.Fatal(err)
	}

	_, db, query, _ := encryptAndLoad(t, setup.Keys, dbDir, q, rotations, 0)
	out := filepath.Join(setup.Root, "result.bin")
	if _, err := Match(server, db, query, out, Pass{}); err != nil {
		t.Fatal(err)
	}
	bp := server.Params.Slots.Bootstrap.BootstrappingParameters
	decryptors := &iriskeys.Holder{KeySet: server.KeySet, Bootstrap: setup.Secret(t, bp, 2, 3)}
	got, err := Decrypt(decryptors, out)
	if err != nil {
		t.Fatal(err)
	}
	for e, v := range got {
		bit := 0.0
		if want[e] {
			bit = 1
		}
		if math.Abs(v-bit) > 1e-3 {
			t.Fatalf("eye %d decrypts to %v, the model says %v (all: %s)", e, v, want[e], fmt.Sprint(got))
		}
	}
	t.Logf("threshold key set from files, public enrollment of %d codes (%d blocks), parties 2 and 3 decrypting: %v", gallery.Rows, db.Meta.Blocks, got)
}
