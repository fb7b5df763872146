// Package engine is the server: it holds an encrypted gallery and the
// evaluation keys, and answers encrypted queries with encrypted, thresholded
// results. It never holds a secret key and never returns a similarity score.
//
// Per query (dg strategy, HyDia):
//  1. the l-1 rotations of the query, hoisted, computed once and shared by
//     all groups;
//  2. per group, sum_i Rot_i(q) * diag_i: ciphertext products accumulated
//     in degree-2 accumulators without relinearisation, one accumulator per
//     worker, then one relinearisation and one rescale;
//  3. the comparator (package comparator) on the scores;
//  4. membership: all groups added, an inner sum over the slots, and the
//     known contribution of empty slots removed, so that slot 0 holds the
//     match count; identification: one ciphertext per group.
package engine

import (
	"fmt"
	"sync"
	"time"

	"encmatch/core/comparator"
	"encmatch/core/errs"
	"encmatch/core/index"
	"encmatch/core/keys"
	"encmatch/core/parallel"
	"encmatch/core/params"
	"encmatch/core/result"

	"github.com/tuneinsight/lattigo/v6/circuits/ckks/polynomial"
	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// Server answers queries against one index.
type Server struct {
	Manifest *index.Manifest
	Params   *params.Set

	eval      *ckks.Evaluator
	poly      *polynomial.Evaluator
	rotations []int
	groups    [][]*rlwe.Ciphertext

	mu          sync.Mutex
	comparators map[float64]*comparator.Comparator
}

// Open loads the evaluation keys and the whole index into memory, checking
// that they belong together.
func Open(indexDir, serverKeyDir string) (*Server, error) {
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
	ek, err := keys.LoadEvaluation(serverKeyDir)
	if err != nil {
		return nil, err
	}
	set := ek.Params
	eval := ckks.NewEvaluator(set.CKKS, ek.Keys)
	s := &Server{Manifest: m, Params: set, eval: eval, poly: polynomial.NewEvaluator(set.CKKS, eval),
		rotations: keys.DGRotations(set), comparators: map[float64]*comparator.Comparator{}}
	for _, g := range m.Groups {
		cts, err := index.LoadGroup(indexDir, m, set, g)
		if err != nil {
			return nil, err
		}
		s.groups = append(s.groups, cts)
	}
	return s, nil
}

// Comparator returns the (cached) comparator for threshold delta.
func (s *Server) Comparator(delta float64) (*comparator.Comparator, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.comparators[delta]; ok {
		return c, nil
	}
	c, err := comparator.New(s.Params.Kappa, delta, s.Manifest.ScoreScale)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errs.ErrInvalid, err)
	}
	s.comparators[delta] = c
	return c, nil
}

// Stats times the phases of a search.
type Stats struct {
	Mode        string  `json:"mode"`
	Groups      int     `json:"groups"`
	Rotations   float64 `json:"rotations_seconds"`
	Similarity  float64 `json:"similarity_seconds"`
	Comparison  float64 `json:"comparison_seconds"`
	Aggregation float64 `json:"aggregation_seconds"`
	Seconds     float64 `json:"seconds"`
}

// Search answers one framed query in mode membership or identification, at
// the index's threshold or at delta when non-nil.
func (s *Server) Search(query []byte, mode string, delta *float64) ([]byte, *Stats, error) {
	start := time.Now()
	if err := result.CheckMode(mode); err != nil {
		return nil, nil, err
	}
	d := s.Manifest.Delta
	if delta != nil {
		d = *delta
	}
	cmp, err := s.Comparator(d)
	if err != nil {
		return nil, nil, err
	}
	q, err := result.UnmarshalQuery(query, s.Manifest.Header(""), s.Params.CKKS)
	if err != nil {
		return nil, nil, err
	}
	st := &Stats{Mode: mode, Groups: len(s.groups)}
	if len(s.groups) == 0 {
		return nil, nil, fmt.Errorf("%w: the index is empty", errs.ErrInvalid)
	}

	t := time.Now()
	rotated, err := s.rotateQuery(q)
	if err != nil {
		return nil, nil, err
	}
	st.Rotations = time.Since(t).Seconds()

	outs := make([]*rlwe.Ciphertext, len(s.groups))
	for g, diags := range s.groups {
		t = time.Now()
		scores, err := s.similarity(rotated, diags)
		if err != nil {
			return nil, nil, err
		}
		st.Similarity += time.Since(t).Seconds()
		t = time.Now()
		if outs[g], err = cmp.Evaluate(s.poly, scores, s.Params.CKKS.DefaultScale()); err != nil {
			return nil, nil, err
		}
		st.Comparison += time.Since(t).Seconds()
	}

	t = time.Now()
	res := &result.Result{Header: result.Header{Mode: mode, Delta: d, Total: s.Manifest.Count}}
	for _, g := range s.Manifest.Groups {
		res.Spans = append(res.Spans, result.Span{Start: g.Start, Count: g.Count})
	}
	if mode == result.Membership {
		ct, err := s.membership(outs, cmp)
		if err != nil {
			return nil, nil, err
		}
		res.Ciphertexts = []*rlwe.Ciphertext{ct}
	} else {
		res.Ciphertexts = outs
	}
	out, err := result.Marshal(s.Manifest.Header(""), res)
	if err != nil {
		return nil, nil, err
	}
	st.Aggregation = time.Since(t).Seconds()
	st.Seconds = time.Since(start).Seconds()
	return out, st, nil
}

// rotateQuery returns the table Rot_i(q), i = 0..l-1, with hoisted
// rotations split across workers.
func (s *Server) rotateQuery(q *rlwe.Ciphertext) ([]*rlwe.Ciphertext, error) {
	l := s.Params.L()
	table := make([]*rlwe.Ciphertext, l)
	table[0] = q
	w := parallel.Workers()
	err := parallel.For(w, func(k int) error {
		var mine []int
		for i := 1 + k; i < l; i += w {
			mine = append(mine, i)
		}
		if len(mine) == 0 {
			return nil
		}
		out, err := s.eval.RotateHoistedNew(q, mine)
		if err != nil {
			return fmt.Errorf("rotating the query: %w", err)
		}
		for _, i := range mine {
			table[i] = out[i]
		}
		return nil
	})
	return table, err
}

// similarity computes sum_i rotated[i] * diags[i] for one group: one
// degree-2 accumulator per worker, summed, relinearised once and rescaled.
func (s *Server) similarity(rotated, diags []*rlwe.Ciphertext) (*rlwe.Ciphertext, error) {
	p := s.Params.CKKS
	level := rotated[0].Level()
	w := parallel.Workers()
	accs := make([]*rlwe.Ciphertext, w)
	err := parallel.For(w, func(k int) error {
		acc := ckks.NewCiphertext(p, 2, level)
		acc.Scale = rotated[0].Scale.Mul(diags[0].Scale)
		for i := k; i < len(diags); i += w {
			if err := s.eval.MulThenAdd(rotated[i], diags[i], acc); err != nil {
				return fmt.Errorf("similarity product %d: %w", i, err)
			}
		}
		accs[k] = acc
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, a := range accs[1:] {
		if err := s.eval.Add(accs[0], a, accs[0]); err != nil {
			return nil, err
		}
	}
	out := ckks.NewCiphertext(p, 1, level)
	if err := s.eval.Relinearize(accs[0], out); err != nil {
		return nil, err
	}
	if err := s.eval.Rescale(out, out); err != nil {
		return nil, err
	}
	return out, nil
}

// membership adds the groups' comparator outputs, sums all slots into every
// slot and removes what the empty slots contribute (each scores exactly 0,
// so each adds the public constant f(0)).
func (s *Server) membership(outs []*rlwe.Ciphertext, cmp *comparator.Comparator) (*rlwe.Ciphertext, error) {
	acc := outs[0].CopyNew()
	for _, o := range outs[1:] {
		if err := s.eval.Add(acc, o, acc); err != nil {
			return nil, err
		}
	}
	slots := s.Params.Slots()
	if err := s.eval.InnerSum(acc, 1, slots, acc); err != nil {
		return nil, fmt.Errorf("membership inner sum: %w", err)
	}
	empty := len(s.groups)*slots - s.Manifest.Count
	if empty > 0 {
		if err := s.eval.Sub(acc, float64(empty)*cmp.Model(0), acc); err != nil {
			return nil, err
		}
	}
	return acc, nil
}
