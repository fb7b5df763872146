package main

import (
	"encoding/json"
	"fmt"
	"time"

	"encmatch/core/base/comparator"
	"encmatch/core/base/envelope"
	"encmatch/core/base/errs"
	"encmatch/core/base/params"
	"encmatch/core/face/client"
	"encmatch/core/face/engine"
	"encmatch/core/face/index"
	"encmatch/core/face/keys"
	"encmatch/core/face/result"
	"encmatch/core/face/strategy"
	"encmatch/core/kernels"
	"encmatch/core/threshold"
)

// The face search methods (docs/ABI.md, "Methods"): keys, indexes,
// enrollment, queries, searches and their results.

// chooseStrategyReply is choose_strategy's reply: the strategy and n1 (null
// with the error when none fits), the estimates behind the choice and the
// vector kernel set whose measured costs they use.
type chooseStrategyReply struct {
	Candidates []strategy.Estimate `json:"candidates"`
	Error      string              `json:"error,omitempty"`
	N1         *int                `json:"n1"`
	Strategy   *string             `json:"strategy"`
	Kernels    string              `json:"kernels"`
}

// chooseStrategy answers which strategy keygen would take for these args.
func chooseStrategy(args, _ []byte) (*chooseStrategyReply, []byte, error) {
	var a struct {
		paramArgs
		strategyArgs
	}
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	set, err := a.set()
	if err != nil {
		return nil, nil, err
	}
	s, all, err := a.choose(set)
	if err != nil && all == nil {
		return nil, nil, err
	}
	if err != nil { // nothing fits: show why
		return &chooseStrategyReply{Candidates: all, Error: err.Error(), Kernels: string(kernels.Active())}, nil, nil
	}
	return &chooseStrategyReply{Candidates: all, N1: &s.N1, Strategy: &s.Name, Kernels: string(kernels.Active())}, nil, nil
}

// keygenReply is keygen's reply: what was generated, for which parameters
// and strategy.
type keygenReply struct {
	KeyID          string             `json:"key_id"`
	N1             int                `json:"n1"`
	Params         params.Description `json:"params"`
	RotationKeys   int                `json:"rotation_keys"`
	Seconds        float64            `json:"seconds"`
	SecretKeyBytes int64              `json:"secret_key_bytes"`
	ServerKeyBytes int64              `json:"server_key_bytes"`
	Strategy       string             `json:"strategy"`
}

// keygen generates a key set in key_dir for the parameters and strategy.
func keygen(args, _ []byte) (*keygenReply, []byte, error) {
	var a struct {
		paramArgs
		strategyArgs
		KeyDir string `json:"key_dir"`
	}
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	if err := required("key_dir", a.KeyDir); err != nil {
		return nil, nil, err
	}
	s, err := a.set()
	if err != nil {
		return nil, nil, err
	}
	strat, _, err := a.choose(s)
	if err != nil {
		return nil, nil, err
	}
	sum, err := keys.Generate(a.KeyDir, s, strat)
	if err != nil {
		return nil, nil, err
	}
	return &keygenReply{KeyID: sum.KeyID, N1: strat.N1, Params: s.Describe(), RotationKeys: sum.RotationKeys,
		Seconds: sum.Seconds, SecretKeyBytes: sum.SecretKeyBytes, ServerKeyBytes: sum.ServerKeyBytes, Strategy: strat.Name}, nil, nil
}

// createIndexReply is create_index's reply: the new index's manifest and
// what its creator should know of it.
type createIndexReply struct {
	*index.Manifest
	Warnings []string `json:"warnings,omitempty"`
}

// createIndex creates an empty index for a key set at its threshold.
func createIndex(args, _ []byte) (*createIndexReply, []byte, error) {
	var a struct {
		IndexDir     string   `json:"index_dir"`
		ServerKeyDir string   `json:"server_key_dir"`
		Delta        *float64 `json:"delta"`
		PayloadWidth int      `json:"payload_width"`
		Rule         string   `json:"rule"`
	}
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	if err := required("index_dir", a.IndexDir); err != nil {
		return nil, nil, err
	}
	if a.Delta == nil {
		return nil, nil, fmt.Errorf("%w: argument \"delta\" is required", errs.ErrInvalid)
	}
	m, err := index.Create(a.IndexDir, a.ServerKeyDir, *a.Delta, index.CreateOptions{PayloadWidth: a.PayloadWidth, Rule: a.Rule})
	if err != nil {
		return nil, nil, err
	}
	return &createIndexReply{m, m.Warnings()}, nil, nil
}

// enrollReply is enroll's reply: the enrollment's summary.
type enrollReply struct {
	*index.EnrollSummary
}

// enroll encrypts a batch of vectors (and their payloads) into an index.
func enroll(args, in []byte) (*enrollReply, []byte, error) {
	var a struct {
		IndexDir     string          `json:"index_dir"`
		ServerKeyDir string          `json:"server_key_dir"`
		ClientKeyDir string          `json:"client_key_dir"`
		N            int             `json:"n"`
		Dim          int             `json:"dim"`
		Labels       json.RawMessage `json:"labels"`
		// NewGroups: no fill of the last group (an enroller without the
		// group files: the service's staging directory).
		NewGroups bool `json:"new_groups"`
	}
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	if a.Labels != nil {
		return nil, nil, fmt.Errorf("%w: argument \"labels\" is no longer taken: labels never reach the index (the key holder seals them, docs/LEAKAGE.md)", errs.ErrInvalid)
	}
	if (a.ServerKeyDir == "") == (a.ClientKeyDir == "") {
		return nil, nil, fmt.Errorf("%w: give exactly one of \"server_key_dir\" (public-key enrollment) and \"client_key_dir\" (the key owner's seeded enrollment)", errs.ErrInvalid)
	}
	// The input is n*dim float32 values, then the int16 payloads (n times
	// the index's payload width: the enroller checks the count).
	if a.N < 1 || a.Dim < 1 || a.Dim > len(in)/4/a.N {
		return nil, nil, fmt.Errorf("%w: expected %d x %d float32 values (%d bytes), then the payloads when the index holds them, got %d bytes", errs.ErrInvalid, a.N, a.Dim, 4*a.N*a.Dim, len(in))
	}
	data, err := float32s(in[:4*a.N*a.Dim], a.N, a.Dim)
	if err != nil {
		return nil, nil, err
	}
	var opt index.EnrollOptions
	opt.NewGroups = a.NewGroups
	if opt.Payloads, err = int16s(in[4*a.N*a.Dim:]); err != nil {
		return nil, nil, err
	}
	if a.ClientKeyDir != "" {
		owner, err := keys.LoadClient(a.ClientKeyDir)
		if err != nil {
			return nil, nil, err
		}
		sum, err := index.EnrollSeeded(a.IndexDir, owner, data, a.N, a.Dim, opt)
		if err != nil {
			return nil, nil, err
		}
		return &enrollReply{sum}, nil, nil
	}
	pub, err := keys.LoadPublic(a.ServerKeyDir)
	if err != nil {
		return nil, nil, err
	}
	sum, err := index.Enroll(a.IndexDir, pub, data, a.N, a.Dim, opt)
	if err != nil {
		return nil, nil, err
	}
	return &enrollReply{sum}, nil, nil
}

// indexInfoReply is index_info's reply: the manifest, and the comparator's
// threshold and bands around it.
type indexInfoReply struct {
	*index.Manifest
	ComparatorDelta float64    `json:"comparator_delta"`
	GuardBand       [2]float64 `json:"guard_band"`
	DecisionBand    float64    `json:"decision_band"`
}

// indexInfo describes the index at index_dir.
func indexInfo(args, _ []byte) (*indexInfoReply, []byte, error) {
	var a struct {
		IndexDir string `json:"index_dir"`
	}
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	m, err := index.Load(a.IndexDir)
	if err != nil {
		return nil, nil, err
	}
	// The comparator's transition is centred at delta (for every rule):
	// scores within the value band may decrypt to values that are not
	// clean (reported as uncertain), scores within the decision band may
	// take either bit.
	c, err := comparator.New(m.Params.Kappa, m.Delta, m.ScoreScale)
	if err != nil {
		return nil, nil, err
	}
	return &indexInfoReply{m, c.Delta, [2]float64{m.Delta - c.ValueBand, m.Delta + c.ValueBand}, c.DecisionBand}, nil, nil
}

// clientOpenReply is client_open's reply: the client's handle, key set and
// parameters.
type clientOpenReply struct {
	Handle int64              `json:"handle"`
	KeyID  string             `json:"key_id"`
	Params params.Description `json:"params"`
}

// clientOpen loads the client (secret key) of a key directory.
func clientOpen(args, _ []byte) (*clientOpenReply, []byte, error) {
	var a struct {
		KeyDir string `json:"key_dir"`
	}
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	c, err := client.Open(a.KeyDir)
	if err != nil {
		return nil, nil, err
	}
	return &clientOpenReply{Handle: putHandle(c), KeyID: c.Meta.KeyID, Params: c.Params.Describe()}, nil, nil
}

// queryEncrypter is what encrypt_query needs of a handle: a client (secret
// key) or a querier (public key).
type queryEncrypter interface {
	EncryptQuery(v []float32) ([]byte, error)
	Dim() int
}

// querierOpenReply is querier_open's reply: the querier's handle, key set
// and parameters.
type querierOpenReply struct {
	Handle int64              `json:"handle"`
	KeyID  string             `json:"key_id"`
	Params params.Description `json:"params"`
}

// querierOpen loads the public key of a server key directory for
// encrypt_query.
func querierOpen(args, _ []byte) (*querierOpenReply, []byte, error) {
	var a struct {
		ServerKeyDir string `json:"server_key_dir"`
	}
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	if err := required("server_key_dir", a.ServerKeyDir); err != nil {
		return nil, nil, err
	}
	q, err := client.OpenQuerier(a.ServerKeyDir)
	if err != nil {
		return nil, nil, err
	}
	return &querierOpenReply{Handle: putHandle(q), KeyID: q.Meta.KeyID, Params: q.Params.Describe()}, nil, nil
}

// encryptQueryReply is encrypt_query's reply: the query's size and the
// time taken to encrypt it.
type encryptQueryReply struct {
	Bytes   int     `json:"bytes"`
	Seconds float64 `json:"seconds"`
}

// encryptQuery encrypts one query vector with a client's or a querier's
// handle.
func encryptQuery(args, in []byte) (*encryptQueryReply, []byte, error) {
	var a struct {
		handleArgs
		Dim int `json:"dim"`
	}
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	c, err := getHandle[queryEncrypter](a.Handle)
	if err != nil {
		return nil, nil, err
	}
	if dim := c.Dim(); a.Dim != dim {
		return nil, nil, fmt.Errorf("%w: query has dimension %d, the keys expect %d", errs.ErrInvalid, a.Dim, dim)
	}
	v, err := float32s(in, 1, a.Dim)
	if err != nil {
		return nil, nil, err
	}
	start := time.Now()
	q, err := c.EncryptQuery(v)
	if err != nil {
		return nil, nil, err
	}
	return &encryptQueryReply{Bytes: len(q), Seconds: time.Since(start).Seconds()}, q, nil
}

// decryptReply is decrypt's reply: the answer of a result.
type decryptReply struct {
	*result.Answer
}

// decrypt decrypts a result with a client's handle.
func decrypt(args, in []byte) (*decryptReply, []byte, error) {
	var a handleArgs
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	c, err := getHandle[*client.Client](a.Handle)
	if err != nil {
		return nil, nil, err
	}
	d, err := c.Decrypt(in)
	if err != nil {
		return nil, nil, err
	}
	return &decryptReply{d}, nil, nil
}

// serverOpenReply is server_open's reply: the server's handle, its index,
// whether it streams its groups, the groups it serves and the time taken
// to load them.
type serverOpenReply struct {
	Groups   []index.Group   `json:"groups"`
	Handle   int64           `json:"handle"`
	Manifest *index.Manifest `json:"manifest"`
	Seconds  float64         `json:"seconds"`
	Streamed bool            `json:"streamed"`
	Warnings []string        `json:"warnings,omitempty"`
}

// serverOpen loads an index (or a shard of it) and its evaluation keys for
// search.
func serverOpen(args, _ []byte) (*serverOpenReply, []byte, error) {
	var a struct {
		IndexDir     string `json:"index_dir"`
		ServerKeyDir string `json:"server_key_dir"`
		MemoryBudget int64  `json:"memory_budget"`
		Groups       *[]int `json:"groups"`
	}
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	opt := engine.Options{MemoryBudget: a.MemoryBudget}
	if a.Groups != nil {
		opt.Groups = *a.Groups
		if opt.Groups == nil {
			opt.Groups = []int{}
		}
	}
	start := time.Now()
	s, err := engine.Open(a.IndexDir, a.ServerKeyDir, opt)
	if err != nil {
		return nil, nil, err
	}
	return &serverOpenReply{Groups: s.Served(), Handle: putHandle(s), Manifest: s.Manifest,
		Seconds: time.Since(start).Seconds(), Streamed: s.Streamed, Warnings: s.Warnings}, nil, nil
}

// checkKeysReply is check_keys's reply: the id of the keys found to be the
// index's.
type checkKeysReply struct {
	KeyID string `json:"key_id"`
}

// checkKeys checks, without loading them, that the evaluation keys in
// server_key_dir belong to the index in index_dir (the check server_open
// makes first): a scale-out driver refuses wrong keys before it starts
// any worker.
func checkKeys(args, _ []byte) (*checkKeysReply, []byte, error) {
	var a struct {
		IndexDir     string `json:"index_dir"`
		ServerKeyDir string `json:"server_key_dir"`
	}
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	m, err := index.Load(a.IndexDir)
	if err != nil {
		return nil, nil, err
	}
	meta, _, err := keys.LoadServerMeta(a.ServerKeyDir)
	if err != nil {
		return nil, nil, err
	}
	if err := m.CheckKeys(meta); err != nil {
		return nil, nil, err
	}
	return &checkKeysReply{KeyID: meta.KeyID}, nil, nil
}

// mergeResultsReply is merge_results's reply: what the merged result
// holds and whether it covers the whole gallery.
type mergeResultsReply struct {
	Complete bool        `json:"complete"`
	Covered  int         `json:"covered"`
	Groups   int         `json:"groups"`
	Mode     result.Mode `json:"mode"`
	Parts    int         `json:"parts"`
	Total    int         `json:"total"`
}

// mergeResults merges the framed results of disjoint shards of the index
// at index_dir (in: the results, each prefixed by its length as a 64-bit
// little-endian integer) into one framed result.
func mergeResults(args, in []byte) (*mergeResultsReply, []byte, error) {
	var a struct {
		IndexDir string `json:"index_dir"`
	}
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	if err := required("index_dir", a.IndexDir); err != nil {
		return nil, nil, err
	}
	m, err := index.Load(a.IndexDir)
	if err != nil {
		return nil, nil, err
	}
	set, err := m.ParamSet()
	if err != nil {
		return nil, nil, err
	}
	var parts []*result.Result
	for rest := in; len(rest) > 0; {
		var chunk []byte
		if chunk, rest, err = envelope.NextChunk(rest); err != nil {
			return nil, nil, fmt.Errorf("merge_results input: %w", err)
		}
		r, err := result.Unmarshal(chunk, m.Header(""), set.CKKS)
		if err != nil {
			return nil, nil, fmt.Errorf("part %d: %w", len(parts), err)
		}
		parts = append(parts, r)
	}
	merged, err := result.Merge(set.CKKS, parts)
	if err != nil {
		return nil, nil, err
	}
	out, err := result.Marshal(m.Header(""), merged)
	if err != nil {
		return nil, nil, err
	}
	missing, _ := merged.Missing()
	covered := merged.Total
	for _, sp := range missing {
		covered -= sp.Count
	}
	return &mergeResultsReply{Complete: len(missing) == 0, Covered: covered, Groups: len(merged.Spans),
		Mode: merged.Mode, Parts: len(parts), Total: merged.Total}, out, nil
}

// searchBatch answers several queries (length-prefixed chunks) against a
// server's handle in one mode, in as few passes over the gallery as the
// server's memory allows (engine.Server.SearchBatch); the results come back
// as length-prefixed chunks in the queries' order. Unsigned searches only.
func searchBatch(args, in []byte) (*searchBatchReply, []byte, error) {
	var a struct {
		handleArgs
		Mode  result.Mode `json:"mode"`
		Bound int         `json:"bound"`
	}
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	s, err := getHandle[*engine.Server](a.Handle)
	if err != nil {
		return nil, nil, err
	}
	queries, err := envelope.Chunks(in, 0, "search_batch input")
	if err != nil {
		return nil, nil, err
	}
	outs, st, err := s.SearchBatch(queries, a.Mode, engine.SearchOptions{Bound: a.Bound})
	if err != nil {
		return nil, nil, err
	}
	var out []byte
	for _, o := range outs {
		out = envelope.AppendChunk(out, o)
	}
	return &searchBatchReply{st}, out, nil
}

// searchBatchReply is search_batch's reply: the batch's statistics.
type searchBatchReply struct {
	*engine.Stats
}

// waitComparatorsReply is wait_comparators' reply: the comparator programs
// ready on every core.
type waitComparatorsReply struct {
	Ready int `json:"ready"`
}

// waitComparators waits for the comparator programs a server records in
// the background after its first searches (engine.Server.WaitComparators).
func waitComparators(args, _ []byte) (*waitComparatorsReply, []byte, error) {
	var a handleArgs
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	s, err := getHandle[*engine.Server](a.Handle)
	if err != nil {
		return nil, nil, err
	}
	return &waitComparatorsReply{Ready: s.WaitComparators()}, nil, nil
}

// searchReply is search's reply: the search's statistics and, for the
// search of a threshold key set, the signed search's description.
type searchReply struct {
	*engine.Stats
	Signed *thresholdBindReply `json:"signed,omitempty"`
}

// search runs one query against a server's handle.
func search(args, in []byte) (*searchReply, []byte, error) {
	var a struct {
		handleArgs
		Mode  result.Mode `json:"mode"`
		Delta *float64    `json:"delta"`
		// Bound is the public bound on the matches of a payload search.
		Bound int `json:"bound"`
		// SigningKey, when set, makes this the search of a threshold key
		// set: the result comes back bound to its query and signed with
		// this server key (threshold.BindSearch), as the decryptors need
		// it. Index names the index (default: the manifest's uid) and
		// Generation its version.
		SigningKey string `json:"signing_key"`
		Index      string `json:"index"`
		Generation int64  `json:"generation"`
	}
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	s, err := getHandle[*engine.Server](a.Handle)
	if err != nil {
		return nil, nil, err
	}
	// The threshold belongs to the index (docs/LEAKAGE.md): "delta" may
	// only repeat it; any other value is refused, never used.
	if a.Delta != nil && *a.Delta != s.Manifest.Delta {
		return nil, nil, fmt.Errorf("%w: the threshold belongs to the index (delta %v, fixed at its creation); a search cannot use delta %v",
			errs.ErrInvalid, s.Manifest.Delta, *a.Delta)
	}
	var key *threshold.SigningKey
	if a.SigningKey != "" { // loaded before the search: a bad key costs no search
		if key, err = threshold.LoadSigningKey(a.SigningKey); err != nil {
			return nil, nil, err
		}
	}
	out, st, err := s.Search(in, a.Mode, engine.SearchOptions{Bound: a.Bound})
	if err != nil {
		return nil, nil, err
	}
	if key == nil {
		return &searchReply{Stats: st}, out, nil
	}
	id := a.Index
	if id == "" {
		id = s.Manifest.UID
	}
	meta := &keys.Meta{KeyID: s.Manifest.KeyID, Fingerprint: s.Manifest.Fingerprint}
	bound, head, err := threshold.BindSearch(key, meta, s.Params, in, out, id, a.Generation)
	if err != nil {
		return nil, nil, err
	}
	return &searchReply{st, signedSearch(head, len(bound))}, bound, nil
}
