package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"encmatch/core/base/comparator"
	"encmatch/core/base/envelope"
	"encmatch/core/base/errs"
	"encmatch/core/base/parallel"
	"encmatch/core/base/params"
	"encmatch/core/face/client"
	"encmatch/core/face/engine"
	"encmatch/core/face/index"
	"encmatch/core/face/keys"
	"encmatch/core/face/offload"
	"encmatch/core/face/result"
	"encmatch/core/face/strategy"
	"encmatch/core/threshold"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// handles holds the loaded clients and servers.
var handles = struct {
	sync.Mutex
	next int64
	m    map[int64]any
}{m: map[int64]any{}}

func putHandle(v any) int64 {
	handles.Lock()
	defer handles.Unlock()
	handles.next++
	handles.m[handles.next] = v
	return handles.next
}

func getHandle[T any](h int64) (T, error) {
	handles.Lock()
	defer handles.Unlock()
	v, ok := handles.m[h].(T)
	if !ok {
		return v, fmt.Errorf("%w: no open %T with handle %d", errs.ErrInvalid, v, h)
	}
	return v, nil
}

type method func(args []byte, in []byte) (any, []byte, error)

var methods = map[string]method{
	"version":         version,
	"presets":         presets,
	"describe":        describe,
	"keygen":          keygen,
	"choose_strategy": chooseStrategy,
	"create_index":    createIndex,
	"enroll":          enroll,
	"index_info":      indexInfo,
	"client_open":     clientOpen,
	"querier_open":    querierOpen,
	"encrypt_query":   encryptQuery,
	"decrypt":         decrypt,
	"server_open":     serverOpen,
	"check_keys":      checkKeys,
	"search":          search,
	"merge_results":   mergeResults,
	"comparator":      comparatorModel,
	"close":           closeHandle,
	"set_threads":     setThreads,
}

func dispatch(name string, args, in []byte) (any, []byte, error) {
	m, ok := methods[name]
	if !ok {
		return nil, nil, fmt.Errorf("%w: unknown method %q", errs.ErrInvalid, name)
	}
	if len(args) == 0 {
		args = []byte("{}")
	}
	return m(args, in)
}

// parse decodes JSON arguments strictly.
func parse(args []byte, v any) error {
	if err := json.Unmarshal(args, v); err != nil {
		return fmt.Errorf("%w: arguments: %v", errs.ErrInvalid, err)
	}
	return nil
}

func required(name, v string) error {
	if v == "" {
		return fmt.Errorf("%w: argument %q is required", errs.ErrInvalid, name)
	}
	return nil
}

// float32s decodes n*dim little-endian float32 values.
func float32s(in []byte, n, dim int) ([]float32, error) {
	if n < 1 || dim < 1 || len(in) != 4*n*dim {
		return nil, fmt.Errorf("%w: expected %d x %d float32 values (%d bytes), got %d bytes", errs.ErrInvalid, n, dim, 4*n*dim, len(in))
	}
	out := make([]float32, n*dim)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(in[4*i:]))
	}
	return out, nil
}

// int16s decodes little-endian int16 values (none from no bytes).
func int16s(in []byte) ([]int16, error) {
	if len(in)%2 != 0 {
		return nil, fmt.Errorf("%w: %d bytes of int16 payload values: not a whole number of values", errs.ErrInvalid, len(in))
	}
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]int16, len(in)/2)
	for i := range out {
		out[i] = int16(binary.LittleEndian.Uint16(in[2*i:]))
	}
	return out, nil
}

func version(_, _ []byte) (any, []byte, error) {
	return map[string]string{"version": "0.1.0", "lattigo": "v6.2.0"}, nil, nil
}

type paramArgs struct {
	Preset string `json:"preset"`
	Kappa  int    `json:"kappa"`
	Dim    int    `json:"dim"`
	// Payload: the chain gets the payload level (mode "payload").
	Payload bool `json:"payload"`
}

func (a *paramArgs) set() (*params.Set, error) {
	if a.Preset == "" {
		a.Preset = params.Default
	}
	if a.Kappa == 0 {
		a.Kappa = params.DefaultKappa
	}
	s, err := params.NewWith(a.Preset, a.Kappa, a.Dim, a.Payload)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errs.ErrInvalid, err)
	}
	return s, nil
}

func presets(_, _ []byte) (any, []byte, error) {
	var out []params.Description
	for _, p := range params.Presets {
		s, err := params.New(p, params.DefaultKappa, 512)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, s.Describe())
	}
	return map[string]any{"presets": out}, nil, nil
}

func describe(args, _ []byte) (any, []byte, error) {
	var a paramArgs
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	s, err := a.set()
	if err != nil {
		return nil, nil, err
	}
	return s.Describe(), nil, nil
}

// strategyArgs choose a similarity strategy: a name and n1, or "auto" with
// the expected gallery size, a memory budget (bytes, 0 = none) and workers.
type strategyArgs struct {
	Strategy     string `json:"strategy"`
	N1           int    `json:"n1"`
	ExpectedSize int    `json:"expected_size"`
	MemoryBudget int64  `json:"memory_budget"`
	Workers      int    `json:"workers"`
}

// choose returns the strategy and the model's estimates: that strategy's
// alone, or for "auto" every candidate ranked best first (also when none
// fits the budget, with the error).
func (a *strategyArgs) choose(set *params.Set) (strategy.Strategy, []strategy.Estimate, error) {
	if a.Strategy == "" {
		a.Strategy = strategy.Auto
	}
	size := a.ExpectedSize
	if size <= 0 {
		size = set.Slots()
	}
	groups := (size + set.Slots() - 1) / set.Slots()
	workers := a.Workers
	if workers <= 0 {
		workers = parallel.Workers()
	}
	p := set.CKKS
	costs := strategy.DefaultCosts.For(int64(ckks.NewCiphertext(p, 1, p.MaxLevel()).BinarySize()),
		int64(rlwe.NewGaloisKey(p).BinarySize()), set.Slots())
	if a.Strategy != strategy.Auto {
		s, err := strategy.New(a.Strategy, a.N1, set.L())
		if err != nil {
			return s, nil, err
		}
		return s, []strategy.Estimate{s.Estimate(groups, workers, a.MemoryBudget, costs)}, nil
	}
	best, all, err := strategy.Choose(set.L(), groups, workers, a.MemoryBudget, costs)
	return best.Strategy, all, err
}

func chooseStrategy(args, _ []byte) (any, []byte, error) {
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
		return map[string]any{"strategy": nil, "n1": nil, "candidates": all, "error": err.Error()}, nil, nil
	}
	return map[string]any{"strategy": s.Name, "n1": s.N1, "candidates": all}, nil, nil
}

func keygen(args, _ []byte) (any, []byte, error) {
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
	return map[string]any{"key_id": sum.KeyID, "rotation_keys": sum.RotationKeys, "server_key_bytes": sum.ServerKeyBytes,
		"secret_key_bytes": sum.SecretKeyBytes, "seconds": sum.Seconds, "params": s.Describe(),
		"strategy": strat.Name, "n1": strat.N1}, nil, nil
}

func createIndex(args, _ []byte) (any, []byte, error) {
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
	return struct {
		*index.Manifest
		Warnings []string `json:"warnings,omitempty"`
	}{m, m.Warnings()}, nil, nil
}

func enroll(args, in []byte) (any, []byte, error) {
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
		return sum, nil, err
	}
	pub, err := keys.LoadPublic(a.ServerKeyDir)
	if err != nil {
		return nil, nil, err
	}
	sum, err := index.Enroll(a.IndexDir, pub, data, a.N, a.Dim, opt)
	return sum, nil, err
}

func indexInfo(args, _ []byte) (any, []byte, error) {
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
	return struct {
		*index.Manifest
		ComparatorDelta float64    `json:"comparator_delta"`
		GuardBand       [2]float64 `json:"guard_band"`
		DecisionBand    float64    `json:"decision_band"`
	}{m, c.Delta, [2]float64{m.Delta - c.ValueBand, m.Delta + c.ValueBand}, c.DecisionBand}, nil, nil
}

func clientOpen(args, _ []byte) (any, []byte, error) {
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
	return map[string]any{"handle": putHandle(c), "key_id": c.Meta.KeyID, "params": c.Params.Describe()}, nil, nil
}

type handleArgs struct {
	Handle int64 `json:"handle"`
}

func (h handleArgs) handleID() int64 { return h.Handle }

// queryEncrypter is what encrypt_query needs of a handle: a client (secret
// key) or a querier (public key).
type queryEncrypter interface {
	EncryptQuery(v []float32) ([]byte, error)
	Dim() int
}

// querierOpen loads the public key of a server key directory for
// encrypt_query.
func querierOpen(args, _ []byte) (any, []byte, error) {
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
	return map[string]any{"handle": putHandle(q), "key_id": q.Meta.KeyID, "params": q.Params.Describe()}, nil, nil
}

func encryptQuery(args, in []byte) (any, []byte, error) {
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
	return map[string]any{"bytes": len(q), "seconds": time.Since(start).Seconds()}, q, nil
}

func decrypt(args, in []byte) (any, []byte, error) {
	var a handleArgs
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	c, err := getHandle[*client.Client](a.Handle)
	if err != nil {
		return nil, nil, err
	}
	d, err := c.Decrypt(in)
	return d, nil, err
}

func serverOpen(args, _ []byte) (any, []byte, error) {
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
	return map[string]any{"handle": putHandle(s), "manifest": s.Manifest, "streamed": s.Streamed,
		"groups": s.Served(), "seconds": time.Since(start).Seconds()}, nil, nil
}

// checkKeys checks, without loading them, that the evaluation keys in
// server_key_dir belong to the index in index_dir (the check server_open
// makes first): a scale-out driver refuses wrong keys before it starts
// any worker.
func checkKeys(args, _ []byte) (any, []byte, error) {
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
	return map[string]any{"key_id": meta.KeyID}, nil, nil
}

// mergeResults merges the framed results of disjoint shards of the index
// at index_dir (in: the results, each prefixed by its length as a 64-bit
// little-endian integer) into one framed result.
func mergeResults(args, in []byte) (any, []byte, error) {
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
	return map[string]any{"mode": merged.Mode, "parts": len(parts), "groups": len(merged.Spans),
		"total": merged.Total, "covered": covered, "complete": len(missing) == 0}, out, nil
}

func search(args, in []byte) (any, []byte, error) {
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
	if a.Bound != 0 && a.Mode != result.Payload {
		return nil, nil, fmt.Errorf("%w: \"bound\" applies to mode %q only", errs.ErrInvalid, result.Payload)
	}
	out, st, err := s.Search(in, a.Mode, engine.SearchOptions{Bound: a.Bound})
	if err != nil || key == nil {
		return st, out, err
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
	return struct {
		*engine.Stats
		Signed map[string]any `json:"signed"`
	}{st, searchInfo(head, len(bound))}, bound, nil
}

func comparatorModel(args, in []byte) (any, []byte, error) {
	var a struct {
		Kappa int     `json:"kappa"`
		Delta float64 `json:"delta"`
	}
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	c, err := comparator.New(a.Kappa, a.Delta, comparator.DefaultScoreScale)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errs.ErrInvalid, err)
	}
	if len(in)%8 != 0 {
		return nil, nil, fmt.Errorf("%w: scores must be float64 values", errs.ErrInvalid)
	}
	values := make([]float64, len(in)/8)
	for i := range values {
		values[i] = c.Model(math.Float64frombits(binary.LittleEndian.Uint64(in[8*i:])))
	}
	return map[string]any{"values": values, "decision_band": c.DecisionBand, "value_band": c.ValueBand,
		"value_tolerance": comparator.ValueTolerance, "degrees": c.Degrees, "gap": c.Gap, "sign_error": c.SignError}, nil, nil
}

// setThreads bounds the threads that run the core's work (GOMAXPROCS: the
// parallel package's workers) to threads (0: leave as is); it returns the
// previous and the new bound. An environment variable cannot do it once
// the library is loaded: Go reads the environment the process started with.
func setThreads(args, _ []byte) (any, []byte, error) {
	var a struct {
		Threads int `json:"threads"`
	}
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	if a.Threads < 0 {
		return nil, nil, fmt.Errorf("%w: threads must be >= 0, got %d", errs.ErrInvalid, a.Threads)
	}
	prev := runtime.GOMAXPROCS(a.Threads)
	return map[string]any{"previous": prev, "threads": runtime.GOMAXPROCS(0)}, nil, nil
}

func closeHandle(args, _ []byte) (any, []byte, error) {
	var a handleArgs
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	handles.Lock()
	v, ok := handles.m[a.Handle]
	delete(handles.m, a.Handle)
	handles.Unlock()
	if !ok {
		return nil, nil, fmt.Errorf("%w: no open handle %d", errs.ErrInvalid, a.Handle)
	}
	switch v.(type) {
	case *engine.Server, *offload.Plan:
		// An index's groups and keys are gigabytes: give them back to the
		// system now, not when the heap next grows (a service deleting or
		// replacing an index would otherwise keep its memory).
		debug.FreeOSMemory()
	}
	return map[string]any{}, nil, nil
}
