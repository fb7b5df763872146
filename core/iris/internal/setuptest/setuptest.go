// Package setuptest runs a threshold iris setup (package irissetup) in
// files for tests: every party's rounds in its own directories, the
// private delivery of the Shamir shares, the finalisation; and rebuilds
// the bootstrapping ring's secret from some parties' Shamir shares, as t
// decryptors together could (which no real party ever does alone).
package setuptest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"encmatch/core/iris/irissetup"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/multiparty"
)

// Setup is a finished setup under Root.
type Setup struct {
	Config *irissetup.Config
	Root   string
	// Keys is the key set's directory (server/, querier/, enroller/).
	Keys string
	// Parties are the parties' secrets, party i at index i - 1.
	Parties []*irissetup.Party
}

// PartyDir is party i's private directory.
func (s *Setup) PartyDir(i int) string { return filepath.Join(s.Root, fmt.Sprintf("party-%d", i)) }

// Run runs a whole setup of cfg under root.
func Run(tb testing.TB, cfg *irissetup.Config, root string) *Setup {
	tb.Helper()
	check := func(err error) {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
	}
	s := &Setup{Config: cfg, Root: root, Keys: filepath.Join(root, "keys")}
	inbox := func(i int) string { return filepath.Join(root, fmt.Sprintf("inbox-%d", i)) }
	bulletin := filepath.Join(root, "bulletin")
	for i := 1; i <= cfg.Parties; i++ {
		check(irissetup.Round1(cfg, i, s.PartyDir(i), bulletin))
	}
	for from := 1; from <= cfg.Parties; from++ { // the private delivery of the Shamir shares
		for to := 1; to <= cfg.Parties; to++ {
			name := irissetup.ShamirFile(from, to)
			check(os.MkdirAll(inbox(to), 0o700))
			check(os.Rename(filepath.Join(s.PartyDir(from), name), filepath.Join(inbox(to), name)))
		}
	}
	for i := 1; i <= cfg.Parties; i++ {
		check(irissetup.Round2(cfg, i, s.PartyDir(i), bulletin, inbox(i)))
		if _, err := os.Stat(filepath.Join(s.PartyDir(i), irissetup.Round1StateFile(i))); !os.IsNotExist(err) {
			tb.Fatalf("party %d's round-one state is still there: %v", i, err)
		}
	}
	check(irissetup.Finalize(cfg, bulletin, s.Keys))
	for i := 1; i <= cfg.Parties; i++ {
		party, err := irissetup.LoadParty(cfg, i, s.PartyDir(i))
		check(err)
		s.Parties = append(s.Parties, party)
	}
	return s
}

// Secret rebuilds the bootstrapping ring's secret (parameters bp) from
// the Shamir shares of the parties active (numbers 1..n; at least the
// threshold), each turned into its additive share by Lattigo's Combiner.
func (s *Setup) Secret(tb testing.TB, bp rlwe.ParameterProvider, active ...int) *rlwe.SecretKey {
	tb.Helper()
	points := make([]multiparty.ShamirPublicPoint, len(active))
	for k, i := range active {
		points[k] = multiparty.ShamirPublicPoint(i)
	}
	secret := rlwe.NewSecretKey(bp)
	rqp := bp.GetRLWEParameters().RingQP()
	for _, i := range active {
		own := multiparty.ShamirPublicPoint(i)
		add := rlwe.NewSecretKey(bp)
		if err := multiparty.NewCombiner(bp, own, points, s.Config.Threshold).GenAdditiveShare(points, own, s.Parties[i-1].Shamir, add); err != nil {
			tb.Fatal(err)
		}
		rqp.Add(secret.Value, add.Value, secret.Value)
	}
	return secret
}
