package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"sync"

	"encmatch/core/base/comparator"
	"encmatch/core/base/errs"
	"encmatch/core/base/parallel"
	"encmatch/core/base/params"
	"encmatch/core/face/engine"
	"encmatch/core/face/index"
	"encmatch/core/face/keys"
	"encmatch/core/face/offload"
	"encmatch/core/face/strategy"
	"encmatch/core/kernels"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// What the methods share (handles, argument parsing, input decoding), and
// the methods about the library itself: its version, the parameters, the
// comparator's model, its threads and closing handles.

// handles holds the loaded clients and servers.
var handles = struct {
	sync.Mutex
	next int64
	m    map[int64]any
}{m: map[int64]any{}}

// putHandle keeps v and returns its new handle.
func putHandle(v any) int64 {
	handles.Lock()
	defer handles.Unlock()
	handles.next++
	handles.m[handles.next] = v
	return handles.next
}

// getHandle returns the open object of type T with handle h.
func getHandle[T any](h int64) (T, error) {
	handles.Lock()
	defer handles.Unlock()
	v, ok := handles.m[h].(T)
	if !ok {
		return v, fmt.Errorf("%w: no open %T with handle %d", errs.ErrInvalid, v, h)
	}
	return v, nil
}

// parse decodes JSON arguments strictly.
func parse(args []byte, v any) error {
	if err := json.Unmarshal(args, v); err != nil {
		return fmt.Errorf("%w: arguments: %v", errs.ErrInvalid, err)
	}
	return nil
}

// required refuses an empty argument name.
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

// handleArgs name an open handle.
type handleArgs struct {
	Handle int64 `json:"handle"`
}

// handleID returns the handle (for arguments that embed handleArgs).
func (h handleArgs) handleID() int64 { return h.Handle }

// paramArgs name a parameter set: a preset, a comparator depth and a
// dimension.
type paramArgs struct {
	Preset string `json:"preset"`
	Kappa  int    `json:"kappa"`
	Dim    int    `json:"dim"`
	// Payload: the chain gets the payload level (mode "payload").
	Payload bool `json:"payload"`
	// Fold: fold the vectors' halves into complex slots (params.Set.Fold);
	// absent: fold where the set can (params.Set.Foldable).
	Fold *bool `json:"fold"`
	// Fingerprint: an existing key set's or index's; the set is then the
	// choice of moduli whose fingerprint it is (keys.ParamSetMatching), so
	// that artefacts made before the default primes changed describe as
	// they are. Absent, or matched by none: the default moduli.
	Fingerprint string `json:"fingerprint"`
}

// set returns the parameter set (defaults for an empty preset, kappa 0 and
// no fold given).
func (a *paramArgs) set() (*params.Set, error) {
	if a.Preset == "" {
		a.Preset = params.Default
	}
	if a.Kappa == 0 {
		a.Kappa = params.DefaultKappa
	}
	s, err := params.NewWith(a.Preset, a.Kappa, a.Dim, a.Payload)
	if err == nil {
		fold := s.Foldable()
		if a.Fold != nil {
			fold = *a.Fold
		}
		if a.Fingerprint != "" {
			if m, merr := keys.ParamSetMatching(a.Preset, a.Kappa, a.Dim, a.Payload, fold, a.Fingerprint); merr == nil {
				return m, nil
			}
		}
		s, err = s.WithFold(fold)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errs.ErrInvalid, err)
	}
	return s, nil
}

// strategyArgs choose a similarity strategy: a name and n1, or "auto" with
// the expected gallery size, a memory budget (bytes, 0 = none), workers
// and whether the key owner will enroll (a seeded store, which the model
// streams at half the bytes).
type strategyArgs struct {
	Strategy     string `json:"strategy"`
	N1           int    `json:"n1"`
	ExpectedSize int    `json:"expected_size"`
	MemoryBudget int64  `json:"memory_budget"`
	Workers      int    `json:"workers"`
	Seeded       bool   `json:"seeded"`
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
	costs := strategy.DefaultCosts().For(int64(ckks.NewCiphertext(p, 1, p.MaxLevel()).BinarySize()),
		int64(rlwe.NewGaloisKey(p).BinarySize()), set.Slots())
	if set.Fold {
		costs = costs.Folded()
	}
	if a.Seeded {
		costs = costs.Seeded()
	}
	costs.StoredBytes = index.BytesPerGroup(set, 0, a.Seeded) / int64(set.L())
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

// versionReply is version's reply: the library's and Lattigo's versions,
// the vector kernel set in use and the sets this CPU runs
// (docs/KERNELS.md).
type versionReply struct {
	Lattigo    string   `json:"lattigo"`
	Version    string   `json:"version"`
	Kernels    string   `json:"kernels"`
	KernelSets []string `json:"kernel_sets"`
}

// version reports the library's version.
func version(_, _ []byte) (*versionReply, []byte, error) {
	r := &versionReply{Lattigo: "v6.2.0 + kernels patch", Version: "0.1.0", Kernels: string(kernels.Active())}
	for _, s := range kernels.Available() {
		r.KernelSets = append(r.KernelSets, string(s))
	}
	return r, nil, nil
}

// presetsReply is presets's reply: the description of every preset.
type presetsReply struct {
	Presets []params.Description `json:"presets"`
}

// presets describes every preset at the default kappa and dimension 512.
func presets(_, _ []byte) (*presetsReply, []byte, error) {
	var out []params.Description
	for _, p := range params.Presets {
		s, err := params.New(p, params.DefaultKappa, 512)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, s.Describe())
	}
	return &presetsReply{Presets: out}, nil, nil
}

// describeReply is describe's reply: the parameter description.
type describeReply struct {
	params.Description
}

// describe describes one parameter set.
func describe(args, _ []byte) (*describeReply, []byte, error) {
	var a paramArgs
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	s, err := a.set()
	if err != nil {
		return nil, nil, err
	}
	return &describeReply{s.Describe()}, nil, nil
}

// comparatorReply is comparator's reply: the comparator's modelled output
// at each score, its bands and its design.
type comparatorReply struct {
	DecisionBand   float64   `json:"decision_band"`
	Degrees        []int     `json:"degrees"`
	Gap            float64   `json:"gap"`
	SignError      float64   `json:"sign_error"`
	ValueBand      float64   `json:"value_band"`
	ValueTolerance float64   `json:"value_tolerance"`
	Values         []float64 `json:"values"`
}

// comparatorModel evaluates the comparator's model (kappa, delta) at the
// float64 scores of in.
func comparatorModel(args, in []byte) (*comparatorReply, []byte, error) {
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
	return &comparatorReply{DecisionBand: c.DecisionBand, Degrees: c.Degrees, Gap: c.Gap, SignError: c.SignError,
		ValueBand: c.ValueBand, ValueTolerance: comparator.ValueTolerance, Values: values}, nil, nil
}

// setThreadsReply is set_threads's reply: the previous and the new bound
// on the core's threads.
type setThreadsReply struct {
	Previous int `json:"previous"`
	Threads  int `json:"threads"`
}

// setThreads bounds the threads that run the core's work (GOMAXPROCS: the
// parallel package's workers) to threads (0: leave as is); it returns the
// previous and the new bound. An environment variable cannot do it once
// the library is loaded: Go reads the environment the process started with.
func setThreads(args, _ []byte) (*setThreadsReply, []byte, error) {
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
	return &setThreadsReply{Previous: prev, Threads: runtime.GOMAXPROCS(0)}, nil, nil
}

// closeReply is close's reply: an empty object.
type closeReply struct{}

// closeHandle closes a handle of any kind.
func closeHandle(args, _ []byte) (*closeReply, []byte, error) {
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
	// An index's groups and keys are gigabytes: give them back to the
	// system now, not when the heap next grows (a service deleting or
	// replacing an index would otherwise keep its memory).
	switch v := v.(type) {
	case *engine.Server:
		v.Close() // its comparator programs, recorded in the background
		debug.FreeOSMemory()
	case *offload.Plan:
		debug.FreeOSMemory()
	}
	return &closeReply{}, nil, nil
}
