package main

import (
	"fmt"
	"time"

	"encmatch/core/base/errs"
	"encmatch/core/iris/irisdb"
	"encmatch/core/iris/iriskeys"
	"encmatch/core/iris/irissetup"
)

// The threshold iris system's methods (docs/ABI.md, "Iris"; packages
// irissetup and irisdb): each party's setup rounds and the aggregation,
// and the enrollment without a key holder, through files.

// irisSetupInitReply is iris_setup_init's reply: the setup written.
type irisSetupInitReply struct {
	Setup *irissetup.Config `json:"setup"`
}

// irisSetupInit writes the public description of a threshold iris setup.
func irisSetupInit(args, _ []byte) (*irisSetupInitReply, []byte, error) {
	var a struct {
		Out       string `json:"out"`
		Preset    string `json:"preset"`
		Kappa     int    `json:"kappa"`
		Threshold int    `json:"threshold"`
		Blocks    int    `json:"blocks"`
	}
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	if err := required("out", a.Out); err != nil {
		return nil, nil, err
	}
	cfg, err := irissetup.NewConfig(a.Preset, a.Kappa, a.Threshold, a.Blocks)
	if err != nil {
		return nil, nil, err
	}
	if err := irissetup.WriteConfig(a.Out, cfg); err != nil {
		return nil, nil, err
	}
	return &irisSetupInitReply{Setup: cfg}, nil, nil
}

// irisPartyArgs name a party and its directories in a setup round.
type irisPartyArgs struct {
	Setup       string `json:"setup"`
	Party       int    `json:"party"`
	PrivateDir  string `json:"private_dir"`
	BulletinDir string `json:"bulletin_dir"`
	SharesDir   string `json:"shares_dir"`
}

// irisRound1Reply is iris_setup_round1's reply: the time taken and the
// party's Shamir shares to deliver, each to its recipient.
type irisRound1Reply struct {
	Seconds     float64  `json:"seconds"`
	ShamirFiles []string `json:"shamir_files"`
}

// irisRound2Reply is iris_setup_round2's reply: the time taken and the
// file of the party's secrets, to keep.
type irisRound2Reply struct {
	Seconds   float64 `json:"seconds"`
	PartyFile string  `json:"party_file"`
}

// irisSetupRound1 runs a party's first round.
func irisSetupRound1(args, _ []byte) (*irisRound1Reply, []byte, error) {
	var a irisPartyArgs
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	if err := requiredArgs("setup", a.Setup, "private_dir", a.PrivateDir, "bulletin_dir", a.BulletinDir); err != nil {
		return nil, nil, err
	}
	cfg, err := irissetup.ReadConfig(a.Setup)
	if err != nil {
		return nil, nil, err
	}
	start := time.Now()
	if err := irissetup.Round1(cfg, a.Party, a.PrivateDir, a.BulletinDir); err != nil {
		return nil, nil, err
	}
	reply := &irisRound1Reply{Seconds: time.Since(start).Seconds()}
	for j := 1; j <= cfg.Parties; j++ {
		reply.ShamirFiles = append(reply.ShamirFiles, irissetup.ShamirFile(a.Party, j))
	}
	return reply, nil, nil
}

// irisSetupRound2 runs a party's second round.
func irisSetupRound2(args, _ []byte) (*irisRound2Reply, []byte, error) {
	var a irisPartyArgs
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	if err := requiredArgs("setup", a.Setup, "private_dir", a.PrivateDir, "bulletin_dir", a.BulletinDir, "shares_dir", a.SharesDir); err != nil {
		return nil, nil, err
	}
	cfg, err := irissetup.ReadConfig(a.Setup)
	if err != nil {
		return nil, nil, err
	}
	start := time.Now()
	if err := irissetup.Round2(cfg, a.Party, a.PrivateDir, a.BulletinDir, a.SharesDir); err != nil {
		return nil, nil, err
	}
	return &irisRound2Reply{Seconds: time.Since(start).Seconds(), PartyFile: irissetup.PartyFile(a.Party)}, nil, nil
}

// irisSetupFinalizeReply is iris_setup_finalize's reply.
type irisSetupFinalizeReply struct {
	KeyID      string  `json:"key_id"`
	GaloisKeys int     `json:"galois_keys"`
	Blocks     int     `json:"blocks"`
	Seconds    float64 `json:"seconds"`
}

// irisSetupFinalize aggregates every party's messages into the key set's
// role directories.
func irisSetupFinalize(args, _ []byte) (*irisSetupFinalizeReply, []byte, error) {
	var a struct {
		Setup       string `json:"setup"`
		BulletinDir string `json:"bulletin_dir"`
		Keys        string `json:"keys"`
	}
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	if err := requiredArgs("setup", a.Setup, "bulletin_dir", a.BulletinDir, "keys", a.Keys); err != nil {
		return nil, nil, err
	}
	cfg, err := irissetup.ReadConfig(a.Setup)
	if err != nil {
		return nil, nil, err
	}
	start := time.Now()
	if err := irissetup.Finalize(cfg, a.BulletinDir, a.Keys); err != nil {
		return nil, nil, err
	}
	p, _, err := cfg.Check()
	if err != nil {
		return nil, nil, err
	}
	return &irisSetupFinalizeReply{KeyID: cfg.KeyID, GaloisKeys: len(iriskeys.ServerGaloisElements(p)), Blocks: cfg.Blocks,
		Seconds: time.Since(start).Seconds()}, nil, nil
}

// requiredArgs is required for each (name, value) pair of kv.
func requiredArgs(kv ...string) error {
	for i := 0; i+1 < len(kv); i += 2 {
		if err := required(kv[i], kv[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// irisEnrollPublic starts a public enrollment (a threshold key set's
// enroller): Enc, the masks and the block keys; the database is pending
// until every party's EncS contribution is in (irisdb.EnrollPublic).
func irisEnrollPublic(args, in []byte) (*irisEnrollReply, []byte, error) {
	var a struct {
		Enroller string  `json:"enroller"`
		DB       string  `json:"db"`
		T        float64 `json:"t"`
		Rows     int     `json:"rows"`
		Length   int     `json:"length"`
	}
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	if err := requiredArgs("enroller", a.Enroller, "db", a.DB); err != nil {
		return nil, nil, err
	}
	codes, err := int8Codes(in, a.Rows, a.Length)
	if err != nil {
		return nil, nil, err
	}
	en, err := iriskeys.LoadEnroller(a.Enroller)
	if err != nil {
		return nil, nil, err
	}
	start := time.Now()
	m, err := irisdb.EnrollPublic(en, a.DB, codes, a.T)
	if err != nil {
		return nil, nil, err
	}
	return &irisEnrollReply{Meta: m, Seconds: time.Since(start).Seconds()}, nil, nil
}

// irisSecondsReply is a reply with the time taken only.
type irisSecondsReply struct {
	Seconds float64 `json:"seconds"`
}

// irisContribute writes a party's EncS contribution to a pending public
// enrollment (irisdb.ContributeEncS), from its secrets of the setup.
func irisContribute(args, _ []byte) (*irisSecondsReply, []byte, error) {
	var a struct {
		irisPartyArgs
		Enroller string `json:"enroller"`
		DB       string `json:"db"`
		Out      string `json:"out"`
	}
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	if err := requiredArgs("setup", a.Setup, "private_dir", a.PrivateDir, "enroller", a.Enroller, "db", a.DB, "out", a.Out); err != nil {
		return nil, nil, err
	}
	cfg, err := irissetup.ReadConfig(a.Setup)
	if err != nil {
		return nil, nil, err
	}
	party, err := irissetup.LoadParty(cfg, a.Party, a.PrivateDir)
	if err != nil {
		return nil, nil, err
	}
	en, err := iriskeys.LoadEnroller(a.Enroller)
	if err != nil {
		return nil, nil, err
	}
	if en.Meta.KeyID != cfg.KeyID {
		return nil, nil, fmt.Errorf("%w: the enroller's key set is %s, the setup's %s", errs.ErrMismatch, en.Meta.KeyID, cfg.KeyID)
	}
	start := time.Now()
	if err := irisdb.ContributeEncS(en, a.DB, party.ID, party.Query, a.Out); err != nil {
		return nil, nil, err
	}
	return &irisSecondsReply{Seconds: time.Since(start).Seconds()}, nil, nil
}

// irisComplete finishes a public enrollment from every party's
// contribution (irisdb.CompleteEnrollment).
func irisComplete(args, _ []byte) (*irisEnrollReply, []byte, error) {
	var a struct {
		Enroller      string   `json:"enroller"`
		DB            string   `json:"db"`
		Contributions []string `json:"contributions"`
	}
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	if err := requiredArgs("enroller", a.Enroller, "db", a.DB); err != nil {
		return nil, nil, err
	}
	en, err := iriskeys.LoadEnroller(a.Enroller)
	if err != nil {
		return nil, nil, err
	}
	start := time.Now()
	m, err := irisdb.CompleteEnrollment(en, a.DB, a.Contributions)
	if err != nil {
		return nil, nil, err
	}
	return &irisEnrollReply{Meta: m, Seconds: time.Since(start).Seconds()}, nil, nil
}
