package main

import (
	"fmt"
	"time"

	"encmatch/core/base/comparator"
	"encmatch/core/base/errs"
	"encmatch/core/iris/ccmm"
	"encmatch/core/iris/irismatch"
	"encmatch/core/iris/irisstore"
)

// The iris methods (docs/ABI.md, "Iris"): key generation, enrollment,
// query encryption, matching and decryption through the files of package
// irisstore. Codes cross the boundary as int8 values in {-1, 0, 1}, one
// masked code per row.

func init() {
	methods["iris_keygen"] = irisKeygen
	methods["iris_enroll"] = irisEnroll
	methods["iris_encrypt_query"] = irisEncryptQuery
	methods["iris_match"] = irisMatch
	methods["iris_decrypt"] = irisDecrypt
	methods["iris_band"] = irisBand
}

// int8Codes reads rows x length int8 codes.
func int8Codes(in []byte, rows, length int) (irisstore.Codes, error) {
	if rows < 1 || length < 1 || len(in) != rows*length {
		return irisstore.Codes{}, fmt.Errorf("%w: expected %d x %d int8 codes (%d bytes), got %d bytes", errs.ErrInvalid, rows, length, rows*length, len(in))
	}
	c := irisstore.Codes{Rows: rows, Len: length, Data: make([]int8, len(in))}
	for i, b := range in {
		c.Data[i] = int8(b)
	}
	return c, nil
}

func irisKeygen(args, _ []byte) (any, []byte, error) {
	var a struct {
		Dir    string `json:"dir"`
		Preset string `json:"preset"`
		Kappa  int    `json:"kappa"`
	}
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	if err := required("dir", a.Dir); err != nil {
		return nil, nil, err
	}
	start := time.Now()
	m, err := irisstore.Generate(a.Dir, a.Preset, a.Kappa)
	if err != nil {
		return nil, nil, err
	}
	return map[string]any{"meta": m, "seconds": time.Since(start).Seconds()}, nil, nil
}

func irisEnroll(args, in []byte) (any, []byte, error) {
	var a struct {
		Holder string  `json:"holder"`
		DB     string  `json:"db"`
		T      float64 `json:"t"`
		Rows   int     `json:"rows"`
		Length int     `json:"length"`
	}
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	codes, err := int8Codes(in, a.Rows, a.Length)
	if err != nil {
		return nil, nil, err
	}
	h, err := irisstore.LoadHolder(a.Holder)
	if err != nil {
		return nil, nil, err
	}
	start := time.Now()
	m, err := h.Enroll(a.DB, codes, a.T)
	if err != nil {
		return nil, nil, err
	}
	return map[string]any{"meta": m, "seconds": time.Since(start).Seconds()}, nil, nil
}

func irisEncryptQuery(args, in []byte) (any, []byte, error) {
	var a struct {
		Querier   string `json:"querier"`
		Out       string `json:"out"`
		Rows      int    `json:"rows"`
		Length    int    `json:"length"`
		Rotations int    `json:"rotations"`
	}
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	codes, err := int8Codes(in, a.Rows, a.Length)
	if err != nil {
		return nil, nil, err
	}
	q, err := irisstore.LoadQuerier(a.Querier)
	if err != nil {
		return nil, nil, err
	}
	start := time.Now()
	if err := q.EncryptQuery(a.Out, codes, a.Rotations); err != nil {
		return nil, nil, err
	}
	return map[string]any{"seconds": time.Since(start).Seconds()}, nil, nil
}

func irisMatch(args, _ []byte) (any, []byte, error) {
	var a struct {
		Server string `json:"server"`
		DB     string `json:"db"`
		Query  string `json:"query"`
		Out    string `json:"out"`
		// KeyCacheGB bounds the memory of the Galois keys (GiB, 0: the default).
		KeyCacheGB float64 `json:"key_cache_gb"`
	}
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	if !(a.KeyCacheGB >= 0 && a.KeyCacheGB <= 1<<20) {
		return nil, nil, fmt.Errorf("%w: key cache of %v GiB", errs.ErrInvalid, a.KeyCacheGB)
	}
	start := time.Now()
	s, err := irisstore.LoadServer(a.Server, int64(a.KeyCacheGB*(1<<30)))
	if err != nil {
		return nil, nil, err
	}
	db, err := s.LoadDB(a.DB)
	if err != nil {
		return nil, nil, err
	}
	q, err := s.LoadQuery(a.Query)
	if err != nil {
		return nil, nil, err
	}
	load := time.Since(start)
	st, err := s.Match(db, q, a.Out)
	if err != nil {
		return nil, nil, err
	}
	ks := s.Cache.Stats()
	return map[string]any{
		"eyes": q.Eyes, "rotations": q.Rotations, "codes": db.Meta.Codes, "blocks": db.Meta.Blocks,
		"load_seconds": load.Seconds(), "product_seconds": st.Product.Seconds(),
		"pipeline_seconds": st.Wall.Seconds(), "seconds": time.Since(start).Seconds(), "gemm_engine": ccmm.GEMMEngine(),
		"stage_wall_seconds": map[string]float64{
			"margins": st.Margins.Seconds(), "lift": st.Lift.Seconds(), "half_bootstrap": st.HalfBootstrap.Seconds(),
			"classify": st.Classify.Seconds(), "reduce": st.Reduce.Seconds(), "gather": st.Gather.Seconds(),
		},
		"half_bootstraps": st.HalfBootstraps, "classified": st.Classified, "bootstraps": st.Bootstraps,
		"margin_band": st.MarginBand,
		"key_cache": map[string]any{
			"budget_bytes": s.Cache.Budget(), "loads": ks.Loads, "hits": ks.Hits,
			"load_seconds": ks.LoadTime.Seconds(), "peak_bytes": ks.PeakBytes,
		},
	}, nil, nil
}

func irisDecrypt(args, _ []byte) (any, []byte, error) {
	var a struct {
		Holder string `json:"holder"`
		Result string `json:"result"`
	}
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	h, err := irisstore.LoadHolder(a.Holder)
	if err != nil {
		return nil, nil, err
	}
	vals, err := h.Decrypt(a.Result)
	if err != nil {
		return nil, nil, err
	}
	return map[string]any{"values": vals}, nil, nil
}

// irisBand reports the comparator's guard band on the normalised margin
// for a key set (its comparator depth) at threshold t.
func irisBand(args, _ []byte) (any, []byte, error) {
	var a struct {
		Keys string  `json:"keys"` // any role's directory
		T    float64 `json:"t"`
	}
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	if !(a.T > 0 && a.T < 1) {
		return nil, nil, fmt.Errorf("%w: threshold t = %v", errs.ErrInvalid, a.T)
	}
	m, err := irisstore.ReadMeta(a.Keys)
	if err != nil {
		return nil, nil, err
	}
	cmp, err := comparator.New(m.Kappa, 0, 1)
	if err != nil {
		return nil, nil, err
	}
	return map[string]any{"margin_band": irismatch.MarginBand(cmp, 1-2*a.T)}, nil, nil
}
