package engine

import (
	"fmt"
	"sync"
	"time"

	"encmatch/core/base/comparator"
	"encmatch/core/base/parallel"
	"encmatch/core/face/index"
	"encmatch/core/face/keys"
	"encmatch/core/face/strategy"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// chunk is a run of consecutive diagonals of one group. A streamed
// seeded group's diagonals come with their stored half only and masks,
// which the worker that takes the chunk completes (index.Masks).
type chunk struct {
	first int
	cts   []*rlwe.Ciphertext
	masks *index.Masks
}

// residentBytes estimates the resident memory of the keys, the query table
// and all groups held in memory, with the Go runtime's headroom.
func (s *Server) residentBytes(ek *keys.Evaluation) int64 {
	ct := s.ciphertextBytes(s.Params.CKKS.MaxLevel())
	// Decoded diagonals take full 64-bit words, whatever their packed size
	// on disk; payload columns are two primes deep.
	cols := int64(2*s.Manifest.PayloadWidth) * s.ciphertextBytes(index.PayloadLevel)
	groups := int64(len(s.served)) * (int64(s.strat.L)*ct + cols)
	live := int64(ek.Keys.BinarySize()) + int64(s.strat.TableSize())*ct + groups
	return int64(float64(live) * strategy.RuntimeOverhead)
}

// ciphertextBytes is the serialized size of a degree-1 ciphertext at level.
func (s *Server) ciphertextBytes(level int) int64 {
	return int64(ckks.NewCiphertext(s.Params.CKKS, 1, level).BinarySize())
}

// runnerBytes estimates what the comparator's recorded programs keep
// between searches (package circuit's Runner): 0.48 GB at the default
// preset and kappa 13 (BenchmarkComparator), about 57 ciphertexts at the
// top level, per program (membership and identification share one; a
// payload search's bits another).
func (s *Server) runnerBytes() int64 {
	ct := s.ciphertextBytes(s.Params.CKKS.MaxLevel())
	programs := int64(1)
	if s.Manifest.PayloadWidth > 0 {
		programs = 2
	}
	return programs * 57 * ct
}

// feed sends every group's diagonals, chunk by chunk, one channel per group,
// from memory or streamed from disk (a seeded group's stored halves, the
// workers drawing the uniform halves: groupScores). Reading runs ahead of
// the computation by at most two chunks and one group. It stops early when
// done closes.
// When columns is not nil, columns[g] receives group g's payload columns
// before its channel closes.
func (s *Server) feed(done <-chan struct{}, columns [][]*rlwe.Ciphertext) (<-chan chan chunk, <-chan error) {
	groups := make(chan chan chunk, 1)
	errc := make(chan error, 1)
	size := s.strat.ChunkSize()
	go func() {
		defer close(groups)
		for g, entry := range s.served {
			ch := make(chan chunk, 2)
			select {
			case groups <- ch:
			case <-done:
				return
			}
			send := func(first int, cts []*rlwe.Ciphertext, masks *index.Masks) error {
				if first >= s.strat.L { // the payload columns, read after the diagonals
					if columns != nil {
						columns[g] = cts
					}
					return nil
				}
				select {
				case ch <- chunk{first, cts, masks}:
					return nil
				case <-done:
					return errStopped
				}
			}
			var err error
			if s.Streamed {
				err = index.StreamGroupStoredHalves(s.dir, s.Manifest, s.Params, entry, size, send)
			} else {
				for first := 0; first < len(s.groups[g]) && err == nil; first += size {
					err = send(first, s.groups[g][first:min(first+size, len(s.groups[g]))], nil)
				}
				if columns != nil {
					columns[g] = s.columns[g]
				}
			}
			if err != nil && err != errStopped {
				errc <- err // before close(ch): whoever drains ch then sees why it ended
			}
			close(ch)
			if err != nil {
				return
			}
		}
	}()
	return groups, errc
}

var errStopped = fmt.Errorf("stopped")

// scoreAndCompare computes every group's scores for each query table and
// runs the comparator on them; a group's comparators overlap the next
// group's products. Each group is read (or streamed) once for all the
// tables: outs[t][g] is table t's comparator output of group g.
func (s *Server) scoreAndCompare(tables []montTable, cmp *comparator.Comparator, scale rlwe.Scale, columns [][]*rlwe.Ciphertext, st *Stats) ([][]*rlwe.Ciphertext, error) {
	done := make(chan struct{})
	defer close(done)
	groups, feedErr := s.feed(done, columns)
	outs := make([][]*rlwe.Ciphertext, len(tables))
	for t := range outs {
		outs[t] = make([]*rlwe.Ciphertext, len(s.served))
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var cmpErr error
	sem := make(chan struct{}, parallel.Workers())
	g := 0
	for ch := range groups {
		t := time.Now()
		scores, err := s.groupScores(tables, ch)
		if err != nil {
			for range ch { // let the feeder finish this group
			}
			select { // a group cut short by a read error: report the read error
			case ferr := <-feedErr:
				return nil, ferr
			default:
			}
			return nil, err
		}
		st.Similarity += time.Since(t).Seconds()
		for q, sc := range scores {
			wg.Add(1)
			sem <- struct{}{}
			go func(q, g int, sc *rlwe.Ciphertext) {
				defer wg.Done()
				defer func() { <-sem }()
				t := time.Now()
				out, cores, err := s.compare(cmp, sc, scale)
				mu.Lock()
				defer mu.Unlock()
				outs[q][g] = out
				st.ComparatorCores = max(st.ComparatorCores, cores)
				if err != nil && cmpErr == nil {
					cmpErr = err
				}
				st.Comparison += time.Since(t).Seconds()
			}(q, g, sc)
		}
		g++
	}
	wg.Wait()
	select {
	case err := <-feedErr:
		return nil, err
	default:
	}
	if cmpErr != nil {
		return nil, cmpErr
	}
	if g != len(s.served) {
		return nil, fmt.Errorf("internal error: scored %d of %d groups", g, len(s.served))
	}
	return outs, nil
}

// groupScores computes sum_i Rot_i(q) * diag_i for each query table q,
// for the group whose chunks arrive on ch (each chunk serves every table
// before the next is read). Each worker takes whole chunks: with the full
// table it accumulates products in its own degree-2 accumulators (one per
// query), and the workers' accumulators are added and relinearised once;
// with baby steps a chunk is giant step j, whose products are accumulated,
// then relinearised and rotated by j*n1 into the worker's giantSum of that
// query (modulo QP, divided by P once per group). Each result is rescaled
// once; folded scores are then reduced to their real parts (realPart).
func (s *Server) groupScores(tables []montTable, ch <-chan chunk) ([]*rlwe.Ciphertext, error) {
	p := s.Params.CKKS
	level := tables[0][0].Level()
	rq := p.RingQ().AtLevel(level)
	full := s.strat.FullTable()
	w := parallel.Workers()
	nq := len(tables)
	accs := make([][]*rlwe.Ciphertext, w) // accs[worker][query]
	sums := make([][]*giantSum, w)
	err := parallel.For(w, func(k int) error {
		accs[k] = make([]*rlwe.Ciphertext, nq)
		sums[k] = make([]*giantSum, nq)
		for c := range ch {
			for i, d := range c.cts {
				if c.masks != nil {
					if err := c.masks.Complete(c.first+i, d); err != nil {
						return err
					}
				}
				if d.Level() != level || d.Degree() != 1 {
					return fmt.Errorf("internal error: diagonal %d has level %d and degree %d", c.first+i, d.Level(), d.Degree())
				}
			}
			for q, table := range tables {
				acc := accs[k][q]
				if acc == nil {
					acc = ckks.NewCiphertext(p, 2, level)
					accs[k][q] = acc
				} else if !full { // a new giant step: reuse the accumulator
					for _, poly := range acc.Value {
						poly.Zero()
					}
				}
				acc.Scale = table[0].Scale.Mul(c.cts[0].Scale) // the same for every chunk
				qs := table[:len(c.cts)]                       // baby steps b = 0, 1, ... of giant step first/n1
				if full {
					qs = table[c.first : c.first+len(c.cts)]
				}
				accumulateProducts(rq, qs, c.cts, acc)
				if full {
					continue
				}
				if sums[k][q] == nil {
					var err error
					if sums[k][q], err = newGiantSum(p, s.eval, level); err != nil {
						return err
					}
				}
				if err := sums[k][q].add(acc, c.first); err != nil {
					return fmt.Errorf("giant step %d: %w", c.first/s.strat.N1, err)
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	outs := make([]*rlwe.Ciphertext, nq)
	for q := range tables {
		if outs[q], err = s.finishScores(accs, sums, q, full); err != nil {
			return nil, err
		}
	}
	return outs, nil
}

// finishScores adds the workers' accumulators of query q (full table,
// then relinearised) or their giant sums, rescales, and takes the real
// part of folded scores.
func (s *Server) finishScores(accs [][]*rlwe.Ciphertext, sums [][]*giantSum, q int, full bool) (*rlwe.Ciphertext, error) {
	p := s.Params.CKKS
	var meta *rlwe.MetaData
	for k := range accs {
		if a := accs[k][q]; a != nil {
			meta = a.MetaData
		}
	}
	if meta == nil {
		return nil, fmt.Errorf("internal error: a group produced no diagonals")
	}
	var out *rlwe.Ciphertext
	if full {
		for k := range accs {
			a := accs[k][q]
			if a == nil {
				continue
			}
			if out == nil {
				out = a
			} else if err := s.eval.Add(out, a, out); err != nil {
				return nil, err
			}
		}
		relin := ckks.NewCiphertext(p, 1, out.Level())
		if err := s.eval.Relinearize(out, relin); err != nil {
			return nil, err
		}
		out = relin
	} else {
		var total *giantSum
		for k := range sums {
			g := sums[k][q]
			if g == nil {
				continue
			}
			if total == nil {
				total = g
			} else {
				total.merge(g)
			}
		}
		out = total.finish(meta)
	}
	if err := s.eval.Rescale(out, out); err != nil {
		return nil, err
	}
	if s.Params.Fold {
		return realPart(s.eval, out)
	}
	return out, nil
}

// realPart is z + conj(z) for folded scores z: each slot's real part
// doubled, the inner product of the unfolded vectors (packing.FoldQuery
// halves the query for it). One key switch per group.
func realPart(eval *ckks.Evaluator, z *rlwe.Ciphertext) (*rlwe.Ciphertext, error) {
	conj, err := eval.ConjugateNew(z)
	if err != nil {
		return nil, fmt.Errorf("real part of the folded scores: %w", err)
	}
	if err := eval.Add(z, conj, z); err != nil {
		return nil, err
	}
	return z, nil
}
