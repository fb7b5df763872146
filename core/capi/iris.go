package main

import (
	"fmt"
	"time"

	"encmatch/core/base/comparator"
	"encmatch/core/base/errs"
	"encmatch/core/iris/ccmm"
	"encmatch/core/iris/foldmatch"
	"encmatch/core/iris/irisdb"
	"encmatch/core/iris/iriskeys"
	"encmatch/core/iris/irismatch"
	"encmatch/core/iris/irisparams"
	"encmatch/core/iris/irisquery"
)

// The iris methods (docs/ABI.md, "Iris"): key generation, enrollment,
// query encryption, matching and decryption through the files of package
// irisdb. Codes cross the boundary as int8 values in {-1, 0, 1}, one
// masked code per row.

// int8Codes reads rows x length int8 codes.
func int8Codes(in []byte, rows, length int) (irisdb.Codes, error) {
	if rows < 1 || length < 1 || len(in) != rows*length {
		return irisdb.Codes{}, fmt.Errorf("%w: expected %d x %d int8 codes (%d bytes), got %d bytes", errs.ErrInvalid, rows, length, rows*length, len(in))
	}
	c := irisdb.Codes{Rows: rows, Len: length, Data: make([]int8, len(in))}
	for i, b := range in {
		c.Data[i] = int8(b)
	}
	return c, nil
}

// irisKeygenReply is iris_keygen's reply: the key set's metadata and the
// time taken.
type irisKeygenReply struct {
	Meta    *iriskeys.Meta `json:"meta"`
	Seconds float64        `json:"seconds"`
}

// irisKeygen generates an iris key set (every role's directory) in dir.
func irisKeygen(args, _ []byte) (*irisKeygenReply, []byte, error) {
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
	m, err := iriskeys.Generate(a.Dir, a.Preset, a.Kappa)
	if err != nil {
		return nil, nil, err
	}
	return &irisKeygenReply{Meta: m, Seconds: time.Since(start).Seconds()}, nil, nil
}

// irisEnrollReply is iris_enroll's reply: the database's metadata and the
// time taken.
type irisEnrollReply struct {
	Meta    *irisdb.Meta `json:"meta"`
	Seconds float64      `json:"seconds"`
}

// irisEnroll encrypts a gallery of codes into a new database.
func irisEnroll(args, in []byte) (*irisEnrollReply, []byte, error) {
	var a struct {
		Holder string  `json:"holder"`
		DB     string  `json:"db"`
		T      float64 `json:"t"`
		Rows   int     `json:"rows"`
		Length int     `json:"length"`
		// Design is the fold design (JSON) a folding preset enrolls with.
		Design *string `json:"design"`
	}
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	codes, err := int8Codes(in, a.Rows, a.Length)
	if err != nil {
		return nil, nil, err
	}
	h, err := iriskeys.LoadHolder(a.Holder)
	if err != nil {
		return nil, nil, err
	}
	start := time.Now()
	var design []byte
	if a.Design != nil {
		design = []byte(*a.Design)
	}
	m, err := irisdb.Enroll(h, a.DB, codes, a.T, design)
	if err != nil {
		return nil, nil, err
	}
	return &irisEnrollReply{Meta: m, Seconds: time.Since(start).Seconds()}, nil, nil
}

// irisEncryptQueryReply is iris_encrypt_query's reply: the time taken.
type irisEncryptQueryReply struct {
	Seconds float64 `json:"seconds"`
}

// irisEncryptQuery encrypts a query's codes (every eye at every rotation)
// to a file.
func irisEncryptQuery(args, in []byte) (*irisEncryptQueryReply, []byte, error) {
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
	q, err := iriskeys.LoadQuerier(a.Querier)
	if err != nil {
		return nil, nil, err
	}
	start := time.Now()
	if err := irisquery.EncryptQuery(q, a.Out, codes, a.Rotations); err != nil {
		return nil, nil, err
	}
	return &irisEncryptQueryReply{Seconds: time.Since(start).Seconds()}, nil, nil
}

// irisMatchReply is iris_match's reply: the match's shape, timings,
// counts, the comparator's band and the Galois key cache's activity.
type irisMatchReply struct {
	Blocks          int          `json:"blocks"`
	Bootstraps      int          `json:"bootstraps"`
	Classified      int          `json:"classified"`
	Codes           int          `json:"codes"`
	Eyes            int          `json:"eyes"`
	GEMMEngine      string       `json:"gemm_engine"`
	HalfBootstraps  int          `json:"half_bootstraps"`
	KeyCache        irisKeyCache `json:"key_cache"`
	LoadSeconds     float64      `json:"load_seconds"`
	MarginBand      float64      `json:"margin_band"`
	PipelineSeconds float64      `json:"pipeline_seconds"`
	ProductSeconds  float64      `json:"product_seconds"`
	ProductFromFile bool         `json:"product_from_file"`
	// Discretised: every eye's value was turned into 0 or 1
	// (package discretise; false for presets without sparse-secret
	// encapsulation).
	Discretised      bool           `json:"discretised"`
	Rotations        int            `json:"rotations"`
	Seconds          float64        `json:"seconds"`
	StageWallSeconds irisStageTimes `json:"stage_wall_seconds"`
	Fold             *irisFoldStats `json:"fold"`
}

// irisFoldStats is what a folding database's pass did (Algorithm 1's
// counts and stages above stay 0).
type irisFoldStats struct {
	Pass                string             `json:"pass"` // "fold" or "pairs"
	Listed              int                `json:"listed"`
	Groups              int                `json:"groups"`
	Refreshes           int                `json:"refreshes"`
	Classified          int                `json:"classified"`
	ReductionBootstraps int                `json:"reduction_bootstraps"`
	OnePerBootstrap     bool               `json:"one_per_bootstrap"`
	Bands               []float64          `json:"bands"`
	StageWallSeconds    irisFoldStageTimes `json:"stage_wall_seconds"`
}

// irisFoldStageTimes is the wall time of each stage of a fold pass
// (seconds).
type irisFoldStageTimes struct {
	Fold       float64 `json:"fold"`
	Refresh    float64 `json:"refresh"`
	Classify   float64 `json:"classify"`
	Reduce     float64 `json:"reduce"`
	Discretise float64 `json:"discretise"`
}

// irisStageTimes is the wall time of each stage of a match (seconds).
type irisStageTimes struct {
	Classify      float64 `json:"classify"`
	Discretise    float64 `json:"discretise"`
	Gather        float64 `json:"gather"`
	HalfBootstrap float64 `json:"half_bootstrap"`
	Lift          float64 `json:"lift"`
	Margins       float64 `json:"margins"`
	Reduce        float64 `json:"reduce"`
}

// irisKeyCache is the Galois key cache's budget and activity during a
// match.
type irisKeyCache struct {
	BudgetBytes int64   `json:"budget_bytes"`
	Hits        int     `json:"hits"`
	LoadSeconds float64 `json:"load_seconds"`
	Loads       int     `json:"loads"`
	PeakBytes   int64   `json:"peak_bytes"`
}

// irisMatch matches an encrypted query against a database and writes the
// encrypted result.
func irisMatch(args, _ []byte) (*irisMatchReply, []byte, error) {
	var a struct {
		Server string `json:"server"`
		DB     string `json:"db"`
		Query  string `json:"query"`
		Out    string `json:"out"`
		// KeyCacheGB bounds the memory of the Galois keys (GiB, 0: the default).
		KeyCacheGB float64 `json:"key_cache_gb"`
		// PairEyes runs the pair pass on these eyes of a folding
		// database (null: the fold pass on every eye).
		PairEyes []int `json:"pair_eyes"`
		// Product keeps the encrypted product between the passes of a
		// folding database (irisquery.Pass.Product; "": not kept).
		Product string `json:"product"`
	}
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	if !(a.KeyCacheGB >= 0 && a.KeyCacheGB <= 1<<20) {
		return nil, nil, fmt.Errorf("%w: key cache of %v GiB", errs.ErrInvalid, a.KeyCacheGB)
	}
	start := time.Now()
	s, err := iriskeys.LoadServer(a.Server, int64(a.KeyCacheGB*(1<<30)))
	if err != nil {
		return nil, nil, err
	}
	db, err := irisdb.Load(s, a.DB)
	if err != nil {
		return nil, nil, err
	}
	q, err := irisquery.LoadQuery(s, a.Query)
	if err != nil {
		return nil, nil, err
	}
	load := time.Since(start)
	st, err := irisquery.Match(s, db, q, a.Out, irisquery.Pass{PairEyes: a.PairEyes, Product: a.Product})
	if err != nil {
		return nil, nil, err
	}
	ks := s.Cache.Stats()
	r := &irisMatchReply{
		Blocks: db.Meta.Blocks, Codes: db.Meta.Codes, Eyes: q.Eyes, GEMMEngine: ccmm.GEMMEngine(),
		KeyCache: irisKeyCache{
			BudgetBytes: s.Cache.Budget(), Hits: ks.Hits, LoadSeconds: ks.LoadTime.Seconds(), Loads: ks.Loads, PeakBytes: ks.PeakBytes,
		},
		LoadSeconds: load.Seconds(), ProductSeconds: st.Product.Seconds(), ProductFromFile: st.ProductFromFile, Rotations: q.Rotations,
		Seconds: time.Since(start).Seconds(),
	}
	if p := st.Pairs; p != nil {
		r.Bootstraps, r.Classified, r.HalfBootstraps, r.MarginBand, r.PipelineSeconds = p.Bootstraps, p.Classified, p.HalfBootstraps, p.MarginBand, p.Wall.Seconds()
		r.Discretised = p.Discretised
		r.StageWallSeconds = irisStageTimes{
			Classify: p.Classify.Seconds(), Discretise: p.Discretise.Seconds(), Gather: p.Gather.Seconds(), HalfBootstrap: p.HalfBootstrap.Seconds(),
			Lift: p.Lift.Seconds(), Margins: p.Margins.Seconds(), Reduce: p.Reduce.Seconds(),
		}
	}
	if f := st.Fold; f != nil {
		pass, listed := "fold", q.Eyes
		if a.PairEyes != nil {
			pass, listed = "pairs", len(a.PairEyes)
		}
		r.PipelineSeconds = f.Wall.Seconds()
		r.Fold = &irisFoldStats{Pass: pass, Listed: listed, Groups: f.Groups, Refreshes: f.Refreshes, Classified: f.Classified,
			ReductionBootstraps: f.ReductionBootstraps, OnePerBootstrap: f.OnePerBootstrap, Bands: f.Bands,
			StageWallSeconds: irisFoldStageTimes{Fold: f.Fold.Seconds(), Refresh: f.Refresh.Seconds(), Classify: f.Classify.Seconds(), Reduce: f.Reduce.Seconds(),
				Discretise: f.Discretise.Seconds()}}
		r.Discretised = f.Discretised
	}
	return r, nil, nil
}

// irisDecryptReply is iris_decrypt's reply: one value per eye, 1 (match)
// or 0; for a folding key set Values is null and Fold holds the result.
type irisDecryptReply struct {
	Values []float64       `json:"values"`
	Fold   *irisFoldResult `json:"fold"`
}

// irisFoldResult is a decrypted folding result (irisquery.FoldResult).
type irisFoldResult struct {
	Pass   string    `json:"pass"` // "fold" or "pairs"
	Eyes   int       `json:"eyes"`
	Listed []int     `json:"listed"`
	Sure   []float64 `json:"sure"`
	Maybe  []float64 `json:"maybe"`
}

// irisDecrypt decrypts a match's result with the key holder's keys.
func irisDecrypt(args, _ []byte) (*irisDecryptReply, []byte, error) {
	var a struct {
		Holder string `json:"holder"`
		Result string `json:"result"`
	}
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	h, err := iriskeys.LoadHolder(a.Holder)
	if err != nil {
		return nil, nil, err
	}
	if h.Params.Folds() {
		r, err := irisquery.DecryptFold(h, a.Result)
		if err != nil {
			return nil, nil, err
		}
		pass := "fold"
		if r.Pairs {
			pass = "pairs"
		}
		return &irisDecryptReply{Fold: &irisFoldResult{Pass: pass, Eyes: r.Eyes, Listed: r.Listed, Sure: r.Sure, Maybe: r.Maybe}}, nil, nil
	}
	vals, err := irisquery.Decrypt(h, a.Result)
	if err != nil {
		return nil, nil, err
	}
	return &irisDecryptReply{Values: vals}, nil, nil
}

// irisBandReply is iris_band's reply: the comparator's guard band on the
// normalised margin.
type irisBandReply struct {
	MarginBand float64 `json:"margin_band"`
}

// irisBand reports the comparator's guard band on the normalised margin
// for a key set (its comparator depth) at threshold t; for a folding key
// set, the pair pass's band on the score.
func irisBand(args, _ []byte) (*irisBandReply, []byte, error) {
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
	m, err := iriskeys.ReadMeta(a.Keys)
	if err != nil {
		return nil, nil, err
	}
	p, err := irisparams.Build(m.Preset, m.Kappa)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", a.Keys, err)
	}
	if p.Folds() {
		fp, lit, err := p.PairFold(1-2*a.T, 1)
		if err != nil {
			return nil, nil, err
		}
		bands, err := foldmatch.Bands(fp, lit)
		if err != nil {
			return nil, nil, err
		}
		return &irisBandReply{MarginBand: bands[0]}, nil, nil
	}
	cmp, err := comparator.New(m.Kappa, 0, 1)
	if err != nil {
		return nil, nil, err
	}
	return &irisBandReply{MarginBand: irismatch.MarginBand(cmp, 1-2*a.T)}, nil, nil
}
