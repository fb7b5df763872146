package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"time"

	"encmatch/core/base/envelope"
	"encmatch/core/base/errs"
	"encmatch/core/base/params"
	"encmatch/core/face/keys"
	"encmatch/core/face/result"
	"encmatch/core/face/strategy"
	"encmatch/core/threshold"
)

// The threshold methods (docs/ABI.md, "Threshold decryption").

// noStrategy asks threshold_init for no similarity strategy's rotation keys.
const noStrategy = "none"

// thresholdInitReply is threshold_init's reply: the setup written and its
// parameters.
type thresholdInitReply struct {
	Params params.Description `json:"params"`
	Setup  *threshold.Config  `json:"setup"`
}

// thresholdInit writes the setup of a threshold key generation.
func thresholdInit(args, _ []byte) (*thresholdInitReply, []byte, error) {
	var a struct {
		paramArgs
		strategyArgs
		Parties   int    `json:"parties"`
		Threshold int    `json:"threshold"`
		Rotations []int  `json:"rotations"`
		Out       string `json:"out"`
	}
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	if err := required("out", a.Out); err != nil {
		return nil, nil, err
	}
	if a.Payload {
		return nil, nil, fmt.Errorf("%w: threshold key sets have no payload level (their flooding noise is measured on the comparator's chain only)", errs.ErrInvalid)
	}
	set, err := a.set()
	if err != nil {
		return nil, nil, err
	}
	var strat *strategy.Strategy
	if a.Strategy != noStrategy {
		s, _, err := a.choose(set)
		if err != nil {
			return nil, nil, err
		}
		strat = &s
	}
	cfg, err := threshold.NewConfig(set, strat, a.Rotations, a.Parties, a.Threshold)
	if err != nil {
		return nil, nil, err
	}
	if err := threshold.WriteConfig(a.Out, cfg); err != nil {
		return nil, nil, err
	}
	return &thresholdInitReply{Params: set.Describe(), Setup: cfg}, nil, nil
}

// partyArgs name a party and its directories in a setup round.
type partyArgs struct {
	Setup       string `json:"setup"`
	Party       int    `json:"party"`
	PrivateDir  string `json:"private_dir"`
	BulletinDir string `json:"bulletin_dir"`
	SharesDir   string `json:"shares_dir"`
}

// load checks the arguments (round 2 also needs shares_dir) and reads the setup.
func (a *partyArgs) load(round2 bool) (*threshold.Config, *params.Set, error) {
	for name, v := range map[string]string{"setup": a.Setup, "private_dir": a.PrivateDir, "bulletin_dir": a.BulletinDir} {
		if err := required(name, v); err != nil {
			return nil, nil, err
		}
	}
	if round2 {
		if err := required("shares_dir", a.SharesDir); err != nil {
			return nil, nil, err
		}
	}
	return threshold.ReadConfig(a.Setup)
}

// thresholdRound1Reply is threshold_round1's reply: the party, the Shamir
// share files it wrote (one per recipient), the number of Galois keys and
// the time taken.
type thresholdRound1Reply struct {
	GaloisKeys  int      `json:"galois_keys"`
	Party       int      `json:"party"`
	Seconds     float64  `json:"seconds"`
	ShamirFiles []string `json:"shamir_files"`
}

// thresholdRound1 runs a party's first round of key generation.
func thresholdRound1(args, _ []byte) (*thresholdRound1Reply, []byte, error) {
	var a partyArgs
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	start := time.Now()
	cfg, set, err := a.load(false)
	if err != nil {
		return nil, nil, err
	}
	if err := threshold.Round1(cfg, set, a.Party, a.PrivateDir, a.BulletinDir); err != nil {
		return nil, nil, err
	}
	shamir := make([]string, cfg.Parties)
	for j := range shamir {
		shamir[j] = threshold.ShamirFile(a.Party, j+1)
	}
	return &thresholdRound1Reply{GaloisKeys: len(cfg.GaloisElements), Party: a.Party, Seconds: time.Since(start).Seconds(),
		ShamirFiles: shamir}, nil, nil
}

// thresholdRound2Reply is threshold_round2's reply: the party, its
// threshold share's file and the time taken.
type thresholdRound2Reply struct {
	Party     int     `json:"party"`
	Seconds   float64 `json:"seconds"`
	ShareFile string  `json:"share_file"`
}

// thresholdRound2 runs a party's second round of key generation.
func thresholdRound2(args, _ []byte) (*thresholdRound2Reply, []byte, error) {
	var a partyArgs
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	start := time.Now()
	cfg, set, err := a.load(true)
	if err != nil {
		return nil, nil, err
	}
	if err := threshold.Round2(cfg, set, a.Party, a.PrivateDir, a.BulletinDir, a.SharesDir); err != nil {
		return nil, nil, err
	}
	return &thresholdRound2Reply{Party: a.Party, Seconds: time.Since(start).Seconds(), ShareFile: threshold.ShareFile(a.Party)}, nil, nil
}

// thresholdFinalizeReply is threshold_finalize's reply: the server key
// set written, its parameters and the time taken.
type thresholdFinalizeReply struct {
	KeyID        string             `json:"key_id"`
	Params       params.Description `json:"params"`
	RotationKeys int                `json:"rotation_keys"`
	Seconds      float64            `json:"seconds"`
}

// thresholdFinalize combines the bulletin's messages into a server key
// directory.
func thresholdFinalize(args, _ []byte) (*thresholdFinalizeReply, []byte, error) {
	var a struct {
		Setup       string `json:"setup"`
		BulletinDir string `json:"bulletin_dir"`
		KeyDir      string `json:"key_dir"`
	}
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	for name, v := range map[string]string{"setup": a.Setup, "bulletin_dir": a.BulletinDir, "key_dir": a.KeyDir} {
		if err := required(name, v); err != nil {
			return nil, nil, err
		}
	}
	start := time.Now()
	cfg, set, err := threshold.ReadConfig(a.Setup)
	if err != nil {
		return nil, nil, err
	}
	if err := threshold.Finalize(cfg, set, a.BulletinDir, a.KeyDir); err != nil {
		return nil, nil, err
	}
	return &thresholdFinalizeReply{KeyID: cfg.KeyID, Params: set.Describe(), RotationKeys: len(cfg.GaloisElements),
		Seconds: time.Since(start).Seconds()}, nil, nil
}

// thresholdReceiverKeygenReply is threshold_receiver_keygen's reply: the
// key set and the receiver's public key file.
type thresholdReceiverKeygenReply struct {
	KeyID     string `json:"key_id"`
	PublicKey string `json:"public_key"`
}

// thresholdReceiverKeygen generates a receiver's key pair for a setup.
func thresholdReceiverKeygen(args, _ []byte) (*thresholdReceiverKeygenReply, []byte, error) {
	var a struct {
		Setup       string `json:"setup"`
		ReceiverDir string `json:"receiver_dir"`
	}
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	if err := required("receiver_dir", a.ReceiverDir); err != nil {
		return nil, nil, err
	}
	cfg, set, err := threshold.ReadConfig(a.Setup)
	if err != nil {
		return nil, nil, err
	}
	if err := threshold.GenerateReceiver(cfg, set, a.ReceiverDir); err != nil {
		return nil, nil, err
	}
	return &thresholdReceiverKeygenReply{KeyID: cfg.KeyID, PublicKey: threshold.ReceiverPublicFile(a.ReceiverDir)}, nil, nil
}

// float64Rows decodes rows x cols little-endian float64 values, checking
// the shape against the input's size before allocating (rows * cols may
// not be computed: it could overflow).
func float64Rows(in []byte, rows, cols int) ([][]float64, error) {
	n := len(in) / 8
	if rows < 1 || cols < 1 || len(in)%8 != 0 || n%rows != 0 || n/rows != cols {
		return nil, fmt.Errorf("%w: expected %d x %d float64 values, got %d bytes", errs.ErrInvalid, rows, cols, len(in))
	}
	out := make([][]float64, rows)
	for i := range out {
		out[i] = make([]float64, cols)
		for j := range out[i] {
			out[i][j] = math.Float64frombits(binary.LittleEndian.Uint64(in[8*(i*cols+j):]))
		}
	}
	return out, nil
}

// thresholdEncryptReply is threshold_encrypt's reply: the ciphertext's
// size and the time taken.
type thresholdEncryptReply struct {
	Bytes   int     `json:"bytes"`
	Seconds float64 `json:"seconds"`
}

// thresholdEncrypt encrypts float64 rows under a server key set's public
// key.
func thresholdEncrypt(args, in []byte) (*thresholdEncryptReply, []byte, error) {
	var a struct {
		KeyDir string `json:"key_dir"`
		Rows   int    `json:"rows"`
		Cols   int    `json:"cols"`
	}
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	rows, err := float64Rows(in, a.Rows, a.Cols)
	if err != nil {
		return nil, nil, err
	}
	pub, err := keys.LoadPublic(a.KeyDir)
	if err != nil {
		return nil, nil, err
	}
	start := time.Now()
	out, err := threshold.Encrypt(pub, rows)
	if err != nil {
		return nil, nil, err
	}
	return &thresholdEncryptReply{Bytes: len(out), Seconds: time.Since(start).Seconds()}, out, nil
}

// thresholdSigningKeygenReply is threshold_signing_keygen's reply: the key
// pair's files and the public key.
type thresholdSigningKeygenReply struct {
	Key       string `json:"key"`
	Public    string `json:"public"`
	PublicHex string `json:"public_hex"`
}

// thresholdSigningKeygen generates a server's signing key pair in dir.
func thresholdSigningKeygen(args, _ []byte) (*thresholdSigningKeygenReply, []byte, error) {
	var a struct {
		Dir string `json:"dir"`
	}
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	if err := required("dir", a.Dir); err != nil {
		return nil, nil, err
	}
	pub, err := threshold.GenerateSigningKey(a.Dir)
	if err != nil {
		return nil, nil, err
	}
	return &thresholdSigningKeygenReply{Key: filepath.Join(a.Dir, threshold.SigningKeyFile),
		Public: filepath.Join(a.Dir, threshold.SigningPublicFile), PublicHex: pub.Hex()}, nil, nil
}

// thresholdSigningPublicReply is threshold_signing_public's reply: the
// public key.
type thresholdSigningPublicReply struct {
	PublicHex string `json:"public_hex"`
}

// thresholdSigningPublic loads and checks a signing key and returns its
// public key.
func thresholdSigningPublic(args, _ []byte) (*thresholdSigningPublicReply, []byte, error) {
	var a struct {
		SigningKey string `json:"signing_key"`
	}
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	if err := required("signing_key", a.SigningKey); err != nil {
		return nil, nil, err
	}
	key, err := threshold.LoadSigningKey(a.SigningKey)
	if err != nil {
		return nil, nil, err
	}
	return &thresholdSigningPublicReply{PublicHex: key.Public().Hex()}, nil, nil
}

// thresholdBind binds a search result to its query and signs it.
func thresholdBind(args, in []byte) (*thresholdBindReply, []byte, error) {
	var a struct {
		KeyDir     string `json:"key_dir"`
		SigningKey string `json:"signing_key"`
		Index      string `json:"index"`
		Generation int64  `json:"generation"`
	}
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	for name, v := range map[string]string{"key_dir": a.KeyDir, "signing_key": a.SigningKey} {
		if err := required(name, v); err != nil {
			return nil, nil, err
		}
	}
	query, rest, err := envelope.NextChunk(in)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: input must be the query then the result, each as u64 length | bytes: %v", errs.ErrInvalid, err)
	}
	res, rest, err := envelope.NextChunk(rest)
	if err != nil || len(rest) != 0 {
		return nil, nil, fmt.Errorf("%w: input must be the query then the result, each as u64 length | bytes", errs.ErrInvalid)
	}
	meta, set, err := keys.LoadServerMeta(a.KeyDir)
	if err != nil {
		return nil, nil, err
	}
	key, err := threshold.LoadSigningKey(a.SigningKey)
	if err != nil {
		return nil, nil, err
	}
	out, head, err := threshold.BindSearch(key, meta, set, query, res, a.Index, a.Generation)
	if err != nil {
		return nil, nil, err
	}
	return signedSearch(head, len(out)), out, nil
}

// thresholdBindReply is threshold_bind's reply (and search's "signed"): a
// signed search's transcript, what it names, its signer and its size.
type thresholdBindReply struct {
	Bytes      int    `json:"bytes"`
	Generation int64  `json:"generation"`
	Index      string `json:"index"`
	Mode       string `json:"mode"`
	Signer     string `json:"signer"`
	Transcript string `json:"transcript"`
}

// signedSearch describes a signed search of size bytes.
func signedSearch(head *threshold.SearchHead, size int) *thresholdBindReply {
	return &thresholdBindReply{Bytes: size, Generation: head.Generation, Index: head.Index, Mode: head.Mode,
		Signer: head.Signer, Transcript: head.Transcript}
}

// thresholdDecryptShareReply is threshold_decrypt_share's reply: the
// share's party, participants, flooding, transcript and journal, the
// search it decrypts, its size and the time taken.
type thresholdDecryptShareReply struct {
	Bytes       int                `json:"bytes"`
	Ciphertexts int                `json:"ciphertexts"`
	Flooding    threshold.Flooding `json:"flooding"`
	Generation  int64              `json:"generation"`
	Index       string             `json:"index"`
	Journal     string             `json:"journal"`
	Mode        string             `json:"mode"`
	Parties     []int              `json:"parties"`
	Party       int                `json:"party"`
	Seconds     float64            `json:"seconds"`
	Transcript  string             `json:"transcript"`
}

// thresholdDecryptShare makes a party's decryption share of a signed
// search for a receiver.
func thresholdDecryptShare(args, in []byte) (*thresholdDecryptShareReply, []byte, error) {
	var a struct {
		Share          string `json:"share"`
		ReceiverPublic string `json:"receiver_public"`
		ServerPublic   string `json:"server_public"`
		Parties        []int  `json:"parties"`
		threshold.FloodOptions
	}
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	for name, v := range map[string]string{"share": a.Share, "receiver_public": a.ReceiverPublic, "server_public": a.ServerPublic} {
		if err := required(name, v); err != nil {
			return nil, nil, err
		}
	}
	share, err := threshold.LoadShare(a.Share)
	if err != nil {
		return nil, nil, err
	}
	recv, err := threshold.LoadReceiverPublic(a.ReceiverPublic)
	if err != nil {
		return nil, nil, err
	}
	server, err := threshold.LoadSigningPublic(a.ServerPublic)
	if err != nil {
		return nil, nil, err
	}
	start := time.Now()
	input, err := threshold.DecodeInput(in, share.Config, share.Set)
	if err != nil {
		return nil, nil, fmt.Errorf("ciphertext: %w", err)
	}
	out, info, err := share.Decrypt(input, a.Parties, recv, server, a.FloodOptions)
	if err != nil {
		return nil, nil, err
	}
	return &thresholdDecryptShareReply{Bytes: len(out), Ciphertexts: len(input.Ciphertexts), Flooding: info.Flooding,
		Generation: input.Search.Generation, Index: input.Search.Index, Journal: info.Journal, Mode: input.Search.Mode,
		Parties: info.Parties, Party: info.Party, Seconds: time.Since(start).Seconds(), Transcript: info.Transcript}, out, nil
}

// thresholdCombineReply is threshold_combine's reply: what was decrypted,
// by which parties with what flooding, a search result's answer and the
// time taken.
type thresholdCombineReply struct {
	Answer      *result.Answer       `json:"answer,omitempty"`
	Ciphertexts int                  `json:"ciphertexts"`
	Flooding    []threshold.Flooding `json:"flooding"`
	Kind        string               `json:"kind"`
	Parties     []int                `json:"parties"`
	Seconds     float64              `json:"seconds"`
	Slots       int                  `json:"slots"`
}

// thresholdCombine combines t decryption shares into the receiver's
// plaintext.
func thresholdCombine(args, in []byte) (*thresholdCombineReply, []byte, error) {
	var a struct {
		ReceiverDir string `json:"receiver_dir"`
	}
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	if err := required("receiver_dir", a.ReceiverDir); err != nil {
		return nil, nil, err
	}
	ctBytes, rest, err := envelope.NextChunk(in)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: input must be the ciphertext then each decryption share, each as u64 length | bytes: %v", errs.ErrInvalid, err)
	}
	var shares [][]byte
	for len(rest) > 0 {
		var sh []byte
		if sh, rest, err = envelope.NextChunk(rest); err != nil {
			return nil, nil, fmt.Errorf("%w: decryption share %d: %v", errs.ErrInvalid, len(shares)+1, err)
		}
		shares = append(shares, sh)
	}
	recv, err := threshold.LoadReceiver(a.ReceiverDir)
	if err != nil {
		return nil, nil, err
	}
	start := time.Now()
	input, err := threshold.DecodeInput(ctBytes, recv.Config, recv.Set)
	if err != nil {
		return nil, nil, fmt.Errorf("ciphertext: %w", err)
	}
	values, info, err := recv.Combine(input, shares)
	if err != nil {
		return nil, nil, err
	}
	slots := recv.Set.Slots()
	out := make([]byte, 0, 8*slots*len(values))
	for _, row := range values {
		for _, v := range row {
			out = binary.LittleEndian.AppendUint64(out, math.Float64bits(v))
		}
	}
	res := &thresholdCombineReply{Ciphertexts: len(values), Flooding: info.Flooding, Kind: input.Kind, Parties: info.Parties,
		Slots: slots}
	if input.Result != nil { // a search result: what it answers, as decrypt reports it
		if res.Answer, err = input.Result.Read(values); err != nil {
			return nil, nil, err
		}
	}
	res.Seconds = time.Since(start).Seconds()
	return res, out, nil
}
