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
	"encmatch/core/face/strategy"
	"encmatch/core/threshold"
)

// The threshold methods (docs/ABI.md, "Threshold decryption").
func init() {
	for name, m := range map[string]method{
		"threshold_init":            thresholdInit,
		"threshold_round1":          thresholdRound1,
		"threshold_round2":          thresholdRound2,
		"threshold_finalize":        thresholdFinalize,
		"threshold_receiver_keygen": thresholdReceiverKeygen,
		"threshold_encrypt":         thresholdEncrypt,
		"threshold_signing_keygen":  thresholdSigningKeygen,
		"threshold_signing_public":  thresholdSigningPublic,
		"threshold_bind":            thresholdBind,
		"threshold_decrypt_share":   thresholdDecryptShare,
		"threshold_combine":         thresholdCombine,
	} {
		methods[name] = m
	}
}

// noStrategy asks threshold_init for no similarity strategy's rotation keys.
const noStrategy = "none"

func thresholdInit(args, _ []byte) (any, []byte, error) {
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
	return map[string]any{"setup": cfg, "params": set.Describe()}, nil, nil
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

func thresholdRound1(args, _ []byte) (any, []byte, error) {
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
	return map[string]any{"party": a.Party, "shamir_files": shamir, "galois_keys": len(cfg.GaloisElements),
		"seconds": time.Since(start).Seconds()}, nil, nil
}

func thresholdRound2(args, _ []byte) (any, []byte, error) {
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
	return map[string]any{"party": a.Party, "share_file": threshold.ShareFile(a.Party), "seconds": time.Since(start).Seconds()}, nil, nil
}

func thresholdFinalize(args, _ []byte) (any, []byte, error) {
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
	return map[string]any{"key_id": cfg.KeyID, "rotation_keys": len(cfg.GaloisElements), "params": set.Describe(),
		"seconds": time.Since(start).Seconds()}, nil, nil
}

func thresholdReceiverKeygen(args, _ []byte) (any, []byte, error) {
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
	return map[string]any{"key_id": cfg.KeyID, "public_key": threshold.ReceiverPublicFile(a.ReceiverDir)}, nil, nil
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

func thresholdEncrypt(args, in []byte) (any, []byte, error) {
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
	return map[string]any{"bytes": len(out), "seconds": time.Since(start).Seconds()}, out, nil
}

func thresholdSigningKeygen(args, _ []byte) (any, []byte, error) {
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
	return map[string]any{"key": filepath.Join(a.Dir, threshold.SigningKeyFile),
		"public": filepath.Join(a.Dir, threshold.SigningPublicFile), "public_hex": pub.Hex()}, nil, nil
}

func thresholdSigningPublic(args, _ []byte) (any, []byte, error) {
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
	return map[string]any{"public_hex": key.Public().Hex()}, nil, nil
}

func thresholdBind(args, in []byte) (any, []byte, error) {
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
	return searchInfo(head, len(out)), out, nil
}

// searchInfo describes a signed search.
func searchInfo(head *threshold.SearchHead, size int) map[string]any {
	return map[string]any{"transcript": head.Transcript, "mode": head.Mode, "index": head.Index,
		"generation": head.Generation, "signer": head.Signer, "bytes": size}
}

func thresholdDecryptShare(args, in []byte) (any, []byte, error) {
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
	return map[string]any{"party": info.Party, "parties": info.Parties, "flooding": info.Flooding,
		"transcript": info.Transcript, "journal": info.Journal, "index": input.Search.Index, "generation": input.Search.Generation,
		"mode": input.Search.Mode, "ciphertexts": len(input.Ciphertexts), "bytes": len(out), "seconds": time.Since(start).Seconds()}, out, nil
}

func thresholdCombine(args, in []byte) (any, []byte, error) {
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
	res := map[string]any{"kind": input.Kind, "ciphertexts": len(values), "slots": slots, "parties": info.Parties,
		"flooding": info.Flooding}
	if input.Result != nil { // a search result: what it answers, as decrypt reports it
		answer, err := input.Result.Read(values)
		if err != nil {
			return nil, nil, err
		}
		res["answer"] = answer
	}
	res["seconds"] = time.Since(start).Seconds()
	return res, out, nil
}
