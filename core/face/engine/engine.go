// Package engine is the server: it holds an encrypted gallery and the
// evaluation keys, and answers encrypted queries with encrypted, thresholded
// results. It never holds a secret key and never returns a similarity score.
//
// Per query, with the strategy the keys and the index were made for
// (package strategy):
//  1. the query's rotation table, computed once and shared by all groups:
//     all l rotations (dg: hoisted; bsgs-diagonal: hoisted baby steps, then
//     hoisted giant steps of each baby step) or only the n1 baby steps
//     (bsgs-tbs, bsgs-tbe);
//  2. per group, sum_i Rot_i(q) * diag_i: ciphertext products accumulated
//     in degree-2 accumulators without relinearisation, then one
//     relinearisation and one rescale (full table), or per giant step j the
//     n1 products of the baby steps with the diagonals pre-rotated by
//     -j*n1, one relinearisation and one rotation by j*n1 (tbs, tbe);
//  3. the comparator (package comparator) on the scores: Lattigo's
//     sequential evaluator, or its recorded program on every core once
//     recorded (package circuit, compare.go);
//  4. membership: all groups added, an inner sum over the slots, and the
//     known contribution of empty slots removed, so that slot 0 holds the
//     match count; identification: one ciphertext per group; payload: the
//     match bits multiplied into the groups' payload columns and summed
//     into a few ciphertexts of cells (package payload).
package engine

import (
	"fmt"
	"time"

	"encmatch/core/base/comparator"
	"encmatch/core/base/errs"
	"encmatch/core/base/parallel"
	"encmatch/core/base/params"
	"encmatch/core/face/index"
	"encmatch/core/face/keys"
	"encmatch/core/face/payload"
	"encmatch/core/face/result"
	"encmatch/core/face/strategy"

	"github.com/tuneinsight/lattigo/v6/circuits/ckks/polynomial"
	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// Options tune a server.
type Options struct {
	// MemoryBudget in bytes (0 = unlimited). When the evaluation keys, the
	// query's rotation table and every group do not fit in it, the groups
	// stay on disk and are streamed through a small window for each query.
	MemoryBudget int64
	// Groups, when not nil, are the positions in the manifest of the only
	// groups this server holds and searches (a shard of the index): its
	// results then cover those groups' spans and are merged with the other
	// shards' results (result.Merge). Nil serves every group.
	Groups []int
	// SequentialComparator keeps the comparator on Lattigo's sequential
	// evaluator: its program is never recorded (0.48 GB of buffers less
	// per program at the default preset, measured by BenchmarkComparator
	// in package circuit). By default a search's comparators run on every
	// core once their program is recorded (compare.go), except on a server
	// whose memory budget does not hold the programs' buffers beside its
	// groups (or that streams them).
	SequentialComparator bool
}

// Server answers queries against one index.
type Server struct {
	Manifest *index.Manifest
	Params   *params.Set
	// Streamed reports whether groups are read from disk for each query.
	Streamed bool
	// Warnings say what the operator should know about this server: a
	// memory budget that even streaming overruns.
	Warnings []string
	dir      string

	// keys are the evaluation keys, shared read-only with every other
	// server of this process on the same key files (keys.LoadEvaluationShared).
	keys   *keys.Evaluation
	eval   *ckks.Evaluator
	poly   *polynomial.Evaluator
	strat  strategy.Strategy
	served []index.Group
	groups [][]*rlwe.Ciphertext
	// columns are the served groups' payload columns, when held in memory.
	columns [][]*rlwe.Ciphertext
	// programs are the comparator's programs, run on every core (unless
	// sequentialComparator).
	programs             programs
	sequentialComparator bool
	// budget is the memory budget the server was opened with (0: none).
	budget int64
}

// Shard is what a server of some groups of an index loads first: the
// manifest, the evaluation keys (checked to be the index's), the
// similarity strategy and the groups it serves.
type Shard struct {
	Manifest *index.Manifest
	Keys     *keys.Evaluation
	Strategy strategy.Strategy
	Served   []index.Group
}

// LoadShard loads the manifest of the index at indexDir and the server
// keys at serverKeyDir, checking that they belong together, and selects
// the groups at positions groups (nil: all; see SelectGroups).
func LoadShard(indexDir, serverKeyDir string, groups []int) (*Shard, error) {
	m, err := index.Load(indexDir)
	if err != nil {
		return nil, err
	}
	meta, _, err := keys.LoadServerMeta(serverKeyDir)
	if err != nil {
		return nil, err
	}
	if err := m.CheckKeys(meta); err != nil {
		return nil, err
	}
	ek, err := keys.LoadEvaluationShared(serverKeyDir)
	if err != nil {
		return nil, err
	}
	strat, err := m.SimilarityStrategy()
	if err != nil {
		return nil, err
	}
	served, err := SelectGroups(m, groups)
	if err != nil {
		return nil, err
	}
	return &Shard{Manifest: m, Keys: ek, Strategy: strat, Served: served}, nil
}

// Open loads the evaluation keys and, when it fits the memory budget, the
// whole index, checking that they belong together.
func Open(indexDir, serverKeyDir string, opt Options) (*Server, error) {
	sh, err := LoadShard(indexDir, serverKeyDir, opt.Groups)
	if err != nil {
		return nil, err
	}
	m, ek, strat, served := sh.Manifest, sh.Keys, sh.Strategy, sh.Served
	set := ek.Params
	eval := ckks.NewEvaluator(set.CKKS, ek.Keys)
	s := &Server{Manifest: m, Params: set, keys: ek, eval: eval, poly: polynomial.NewEvaluator(set.CKKS, eval),
		strat: strat, served: served, dir: indexDir, sequentialComparator: opt.SequentialComparator, budget: opt.MemoryBudget}
	// The comparator's programs keep buffers (runnerBytes): a server whose
	// budget does not hold them beside the index keeps Lattigo's
	// sequential evaluator, and so does one that streams.
	if opt.MemoryBudget > 0 && s.residentBytes(ek)+s.runnerBytes() > opt.MemoryBudget {
		s.sequentialComparator = true
	}
	if s.Streamed = opt.MemoryBudget > 0 && s.residentBytes(ek) > opt.MemoryBudget; s.Streamed {
		if strat.PreRotatedByServer() {
			return nil, fmt.Errorf("%w: the index does not fit a memory budget of %.2f GB and %s cannot stream it (its diagonals are rotated at load); use %s", errs.ErrInvalid, float64(opt.MemoryBudget)/1e9, strat.Name, strategy.BSGSTBE)
		}
		keyBytes := int64(ek.Keys.BinarySize())
		if need := strat.StreamingMemory(keyBytes, s.ciphertextBytes(set.CKKS.MaxLevel()), parallel.Workers()); need > opt.MemoryBudget {
			s.Warnings = append(s.Warnings, fmt.Sprintf("the memory budget of %.2f GB is below what streaming this index needs, about %.2f GB "+
				"(the keys, %.2f GB, and a window of %s n1 = %d chunks): the server will use more; a larger budget, or keys with a "+
				"smaller n1 (choose_strategy with this budget), keep it within", float64(opt.MemoryBudget)/1e9, float64(need)/1e9,
				float64(keyBytes)/1e9, strat.Name, strat.N1))
		}
		return s, nil
	}
	for _, g := range served {
		cts, err := index.LoadGroup(indexDir, m, set, g)
		if err != nil {
			return nil, err
		}
		s.columns = append(s.columns, cts[set.L():])
		cts = cts[:set.L()]
		if strat.PreRotatedByServer() {
			if err := s.preRotate(cts); err != nil {
				return nil, err
			}
		}
		s.groups = append(s.groups, cts)
	}
	return s, nil
}

// SelectGroups returns the manifest's groups at positions pick (all of
// them when pick is nil), refusing positions out of range or repeated.
func SelectGroups(m *index.Manifest, pick []int) ([]index.Group, error) {
	if pick == nil {
		return m.Groups, nil
	}
	if len(pick) == 0 {
		return nil, fmt.Errorf("%w: a shard must hold at least one group", errs.ErrInvalid)
	}
	seen := map[int]bool{}
	out := make([]index.Group, 0, len(pick))
	for _, g := range pick {
		if g < 0 || g >= len(m.Groups) {
			return nil, fmt.Errorf("%w: group %d does not exist (the index has %d groups)", errs.ErrInvalid, g, len(m.Groups))
		}
		if seen[g] {
			return nil, fmt.Errorf("%w: group %d is listed twice", errs.ErrInvalid, g)
		}
		seen[g] = true
		out = append(out, m.Groups[g])
	}
	return out, nil
}

// Served returns the groups this server searches (every group of the index
// unless it was opened as a shard).
func (s *Server) Served() []index.Group { return s.served }

// Comparator returns the comparator of the index's threshold (comparator.New
// caches it for the process). A search has no other: the threshold belongs
// to the index, fixed by whoever created it (a querier that could choose it
// would recover scores by bisection).
func (s *Server) Comparator() (*comparator.Comparator, error) {
	c, err := comparator.New(s.Params.Kappa, s.Manifest.Delta, s.Manifest.ScoreScale)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errs.ErrInvalid, err)
	}
	return c, nil
}

// Stats times the phases of a search.
type Stats struct {
	Mode        result.Mode `json:"mode"`
	Groups      int         `json:"groups"`
	Rotations   float64     `json:"rotations_seconds"`
	Similarity  float64     `json:"similarity_seconds"`
	Comparison  float64     `json:"comparison_seconds"`
	Aggregation float64     `json:"aggregation_seconds"`
	Seconds     float64     `json:"seconds"`
	Streamed    bool        `json:"streamed"`
	// Queries is the number of queries the search answered (SearchBatch).
	Queries int `json:"queries"`
	// ComparatorCores is the most cores one group's comparator ran on: 1
	// with Lattigo's sequential evaluator, every core with its recorded
	// program (recorded in the background after the first search).
	ComparatorCores int `json:"comparator_cores"`
}

// SearchOptions tune one search.
type SearchOptions struct {
	// Bound is the public bound on the number of matches of a payload
	// search (0: payload.DefaultBound); the result's size depends on it.
	Bound int
}

// Search answers one framed query in mode membership, identification or
// payload, at the index's threshold (there is no other); SearchOptions{}
// is the default payload bound.
func (s *Server) Search(query []byte, mode result.Mode, opt SearchOptions) ([]byte, *Stats, error) {
	outs, st, err := s.SearchBatch([][]byte{query}, mode, opt)
	if err != nil {
		return nil, nil, err
	}
	return outs[0], st, nil
}

// MaxBatch is the most queries SearchBatch takes in one call.
const MaxBatch = 64

// SearchBatch answers several framed queries in one mode. A server that
// streams its groups from disk answers them in as few passes over the
// gallery as its memory budget allows (BatchLimit): each group is read and
// its seeded masks regenerated once per pass, and its diagonals multiplied
// into every query's accumulators before the next are read. outs[i] is
// query i's result, the bytes Search returns for it; Stats covers the
// whole batch.
func (s *Server) SearchBatch(queries [][]byte, mode result.Mode, opt SearchOptions) ([][]byte, *Stats, error) {
	start := time.Now()
	if err := mode.Check(); err != nil {
		return nil, nil, err
	}
	if len(queries) == 0 || len(queries) > MaxBatch {
		return nil, nil, fmt.Errorf("%w: a batch of %d queries (1 to %d)", errs.ErrInvalid, len(queries), MaxBatch)
	}
	if opt.Bound != 0 && mode != result.Payload {
		return nil, nil, fmt.Errorf("%w: \"bound\" applies to mode %q only", errs.ErrInvalid, result.Payload)
	}
	var layout payload.Layout
	scale := s.Params.CKKS.DefaultScale()
	if mode == result.Payload {
		if s.Manifest.PayloadWidth == 0 {
			return nil, nil, fmt.Errorf("%w: the index holds no payloads (it was created without a payload width): search it by membership or identification", errs.ErrInvalid)
		}
		if opt.Bound == 0 {
			opt.Bound = payload.DefaultBound
		}
		var err error
		if layout, err = payload.NewLayout(s.Params.Slots(), len(s.Manifest.Groups), s.Manifest.PayloadWidth, opt.Bound); err != nil {
			return nil, nil, fmt.Errorf("%w: %v", errs.ErrInvalid, err)
		}
		scale = rlwe.NewScale(payload.ResultScale)
	}
	cmp, err := s.Comparator()
	if err != nil {
		return nil, nil, err
	}
	qs := make([]*rlwe.Ciphertext, len(queries))
	for i, query := range queries {
		if qs[i], err = result.UnmarshalQuery(query, s.Manifest.Header(""), s.Params.CKKS); err != nil {
			if len(queries) > 1 {
				err = fmt.Errorf("query %d: %w", i, err)
			}
			return nil, nil, err
		}
	}
	groups := len(s.served)
	st := &Stats{Mode: mode, Groups: groups, Streamed: s.Streamed, Queries: len(queries)}
	if groups == 0 {
		return nil, nil, fmt.Errorf("%w: the index is empty", errs.ErrInvalid)
	}
	out := make([][]byte, 0, len(qs))
	limit := s.BatchLimit()
	for first := 0; first < len(qs); first += limit {
		round, err := s.searchRound(qs[first:min(first+limit, len(qs))], mode, cmp, scale, layout, st)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, round...)
	}
	st.Seconds = time.Since(start).Seconds()
	s.recordPending(cmp)
	return out, st, nil
}

// BatchLimit is the most queries one pass over the gallery serves. A
// server that holds its groups in memory reads nothing per query, so it
// takes queries one at a time (a pass per query costs no more, and holds
// one query's rotation table, about 0.13 GB at the default preset); a
// streamed one takes as many as their tables and accumulators fit in its
// memory budget beside the keys and the streaming window (at least one).
func (s *Server) BatchLimit() int {
	if !s.Streamed {
		return 1
	}
	ct := s.ciphertextBytes(s.Params.CKKS.MaxLevel())
	table := int64(s.strat.TableSize())
	// A query's table, and per worker a degree-2 accumulator and a giant
	// sum modulo QP (about two ciphertexts each), twice over: Go's collector
	// lets the heap grow to twice what is live (measured: 0.52 GB per
	// further query at the default preset, folded, bsgs-tbe n1 16).
	perQuery := 2 * int64(float64((table+int64(4*parallel.Workers()))*ct)*strategy.RuntimeOverhead)
	room := s.budget - int64(float64(int64(s.keys.Keys.BinarySize())+int64(4*s.strat.ChunkSize())*ct)*strategy.RuntimeOverhead)
	return max(1, min(MaxBatch, int(room/perQuery)))
}

// searchRound answers queries with one pass over the gallery.
func (s *Server) searchRound(qs []*rlwe.Ciphertext, mode result.Mode, cmp *comparator.Comparator, scale rlwe.Scale, layout payload.Layout, st *Stats) ([][]byte, error) {
	t := time.Now()
	tables := make([]montTable, len(qs))
	for i, q := range qs {
		table, err := s.queryTable(q)
		if err != nil {
			return nil, err
		}
		tables[i] = s.montgomery(table)
	}
	st.Rotations += time.Since(t).Seconds()

	groups := len(s.served)
	var columns [][]*rlwe.Ciphertext
	if mode == result.Payload {
		columns = make([][]*rlwe.Ciphertext, groups)
	}
	outs, err := s.scoreAndCompare(tables, cmp, scale, columns, st)
	if err != nil {
		return nil, err
	}

	t = time.Now()
	defer func() { st.Aggregation += time.Since(t).Seconds() }()
	framed := make([][]byte, len(qs))
	for i := range qs {
		res := NewResult(s.Manifest, s.served, mode)
		switch mode {
		case result.Membership:
			ct, err := s.membership(outs[i], cmp)
			if err != nil {
				return nil, err
			}
			res.Ciphertexts = []*rlwe.Ciphertext{ct}
		case result.Payload:
			pg := make([]payload.Group, groups)
			for g, entry := range s.served {
				pg[g] = payload.Group{Index: s.groupIndex(entry), Start: entry.Start, Count: entry.Count, Bits: outs[i][g], Columns: columns[g]}
			}
			cts, err := payload.NewCompactor(s.Params.CKKS, s.keys.Keys, layout).Compact(pg)
			if err != nil {
				return nil, err
			}
			res.Layout, res.Ciphertexts = &layout, cts
		default:
			res.Ciphertexts = outs[i]
		}
		if framed[i], err = Marshal(s.eval, s.Manifest, res); err != nil {
			return nil, err
		}
	}
	return framed, nil
}

// NewResult is the empty result of a search in mode over the groups
// served: its header and the spans it covers.
func NewResult(m *index.Manifest, served []index.Group, mode result.Mode) *result.Result {
	res := &result.Result{Header: result.Header{Mode: mode, Delta: m.Delta, Rule: m.Rule, Total: m.Count}}
	for _, g := range served {
		res.Spans = append(res.Spans, result.Span{Start: g.Start, Count: g.Count})
	}
	return res
}

// Marshal frames a result of the index m, its ciphertexts brought to
// level 0 first (a chain with the payload level leaves a level unused by
// the other modes: results always travel at level 0).
func Marshal(eval *ckks.Evaluator, m *index.Manifest, res *result.Result) ([]byte, error) {
	for _, ct := range res.Ciphertexts {
		eval.DropLevel(ct, ct.Level())
	}
	return result.Marshal(m.Header(""), res)
}

// groupIndex is the position of a served group in the whole index.
func (s *Server) groupIndex(g index.Group) int {
	for i, h := range s.Manifest.Groups {
		if h.Start == g.Start {
			return i
		}
	}
	return -1
}

// preRotate rotates diagonal i by -j*n1 (j = i/n1), in place (bsgs-tbs, at
// load).
func (s *Server) preRotate(diags []*rlwe.Ciphertext) error {
	return parallel.For(len(diags), func(i int) error {
		if r := s.strat.PreRotation(i); r != 0 {
			if err := s.eval.Rotate(diags[i], r, diags[i]); err != nil {
				return fmt.Errorf("pre-rotating diagonal %d: %w", i, err)
			}
		}
		return nil
	})
}

// hoisted returns ct rotated by each of rots, with hoisted rotations, the
// rotations split across workers (each worker decomposes ct once).
func (s *Server) hoisted(ct *rlwe.Ciphertext, rots []int) (map[int]*rlwe.Ciphertext, error) {
	w := min(parallel.Workers(), max(len(rots), 1))
	parts := make([]map[int]*rlwe.Ciphertext, w)
	err := parallel.For(w, func(k int) error {
		var mine []int
		for i := k; i < len(rots); i += w {
			mine = append(mine, rots[i])
		}
		var err error
		if len(mine) > 0 {
			parts[k], err = s.eval.RotateHoistedNew(ct, mine)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("rotating the query: %w", err)
	}
	out := map[int]*rlwe.Ciphertext{}
	for _, p := range parts {
		for r, c := range p {
			out[r] = c
		}
	}
	return out, nil
}

// queryTable returns Rot_i(q) for i = 0..l-1 (dg, bsgs-diagonal) or for the
// baby steps i = 0..n1-1 (tbs, tbe).
func (s *Server) queryTable(q *rlwe.Ciphertext) ([]*rlwe.Ciphertext, error) {
	l, n1 := s.strat.L, s.strat.N1
	table := make([]*rlwe.Ciphertext, s.strat.TableSize())
	babies, err := s.hoisted(q, s.strat.Babies())
	if err != nil {
		return nil, err
	}
	table[0] = q
	for b, ct := range babies {
		table[b] = ct
	}
	if s.strat.Name != strategy.BSGSDiagonal {
		return table, nil
	}
	// Giant steps of every baby step, hoisted per baby step (double hoisting).
	giants := s.strat.Giants()
	err = parallel.For(n1, func(b int) error {
		var rots []int
		for _, g := range giants {
			if g+b < l {
				rots = append(rots, g)
			}
		}
		if len(rots) == 0 {
			return nil
		}
		out, err := s.eval.RotateHoistedNew(table[b], rots)
		if err != nil {
			return fmt.Errorf("giant steps of baby step %d: %w", b, err)
		}
		for _, g := range rots {
			table[g+b] = out[g]
		}
		return nil
	})
	return table, err
}

// montTable is a query table converted in place to the Montgomery domain,
// the form in which Lattigo's ciphertext product takes its first operand:
// converting it once per query instead of once per product removes a third
// of the similarity's coefficient arithmetic.
type montTable []*rlwe.Ciphertext

// montgomery converts the query table in place; the table must not be used
// as ordinary ciphertexts afterwards.
func (s *Server) montgomery(table []*rlwe.Ciphertext) montTable {
	rq := s.Params.CKKS.RingQ().AtLevel(table[0].Level())
	_ = parallel.For(len(table), func(i int) error {
		for _, poly := range table[i].Value {
			rq.MForm(poly, poly)
		}
		return nil
	})
	return montTable(table)
}

// membership adds the served groups' comparator outputs, sums all slots
// into every slot and removes what the empty slots contribute: slot 0 then
// holds the number of matches among the served groups' entries.
func (s *Server) membership(outs []*rlwe.Ciphertext, cmp *comparator.Comparator) (*rlwe.Ciphertext, error) {
	acc := outs[0].CopyNew()
	for _, o := range outs[1:] {
		if err := s.eval.Add(acc, o, acc); err != nil {
			return nil, err
		}
	}
	if err := s.eval.InnerSum(acc, 1, s.Params.Slots(), acc); err != nil {
		return nil, fmt.Errorf("membership inner sum: %w", err)
	}
	return acc, SubtractEmpty(s.eval, acc, s.served, s.Params.Slots(), cmp)
}

// SubtractEmpty removes from the inner sum acc of the groups served what
// their empty slots contribute: each scores exactly 0, so each adds the
// public constant f(0) of the comparator.
func SubtractEmpty(eval *ckks.Evaluator, acc *rlwe.Ciphertext, served []index.Group, slots int, cmp *comparator.Comparator) error {
	empty := len(served) * slots
	for _, g := range served {
		empty -= g.Count
	}
	if empty > 0 {
		return eval.Sub(acc, float64(empty)*cmp.Model(0), acc)
	}
	return nil
}
