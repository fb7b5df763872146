package engine

import (
	"bytes"
	"errors"
	"math/rand"
	"runtime"
	"testing"

	"encmatch/core/base/errs"
	"encmatch/core/base/params"
	"encmatch/core/face/result"
)

// TestRecordedComparatorGivesTheSameResults: the first search of each
// mode runs Lattigo's sequential evaluator and leaves its program to be
// recorded in the background; once recorded, the same queries' results,
// comparators on every core, are the same bytes (membership,
// identification and payload, whose bits are at another scale), and a
// further search still is. A server that streams to stay within its memory
// budget keeps Lattigo's evaluator.
func TestRecordedComparatorGivesTheSameResults(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("one core: the comparator runs sequentially")
	}
	rng := rand.New(rand.NewSource(31))
	const dim, delta, width = 32, 0.5, 2
	f := newPayloadFixture(t, params.Toy, 12, dim, 0, delta, width, "")
	q := randomUnit(rng, dim)
	gal := gallery(rng, q, 2600, crowdOutsideTheBand(t, rng, 12, delta, 6, 6, 0.3))
	f.enrollPayloads(t, gal, randomPayloads(rng, len(gal), width), true)
	for _, streamed := range []bool{false, true} {
		srv := f.open(t, streamed)
		query, err := f.client.EncryptQuery(f32(q))
		if err != nil {
			t.Fatal(err)
		}
		modes := []result.Mode{result.Membership, result.Identification, result.Payload}
		first := map[result.Mode][]byte{}
		for _, mode := range modes {
			out, st, err := srv.Search(query, mode, SearchOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if st.ComparatorCores != 1 && mode == result.Membership {
				t.Fatalf("the first search ran the comparator on %d cores", st.ComparatorCores)
			}
			first[mode] = out
		}
		want, cores := 2, runtime.GOMAXPROCS(0) // programs: the default and the payload scale
		if streamed {                           // streamed to stay in a budget: Lattigo's evaluator only
			want, cores = 0, 1
		}
		if n := srv.WaitComparators(); n != want {
			t.Fatalf("streamed %v: %d programs recorded, want %d", streamed, n, want)
		}
		for range 2 {
			for _, mode := range modes {
				out, st, err := srv.Search(query, mode, SearchOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if st.ComparatorCores != cores {
					t.Fatalf("%s: the comparator ran on %d cores", mode, st.ComparatorCores)
				}
				if !bytes.Equal(out, first[mode]) {
					t.Fatalf("streamed %v, %s: the recorded comparator's result differs from Lattigo's", streamed, mode)
				}
			}
		}
		// Closed: the programs are dropped and none is recorded again.
		srv.Close()
		out, st, err := srv.Search(query, result.Membership, SearchOptions{})
		if err != nil || st.ComparatorCores != 1 || !bytes.Equal(out, first[result.Membership]) {
			t.Fatalf("after Close: %v, comparator on %d cores", err, st.ComparatorCores)
		}
		if n := srv.WaitComparators(); n != 0 {
			t.Fatalf("after Close: %d programs", n)
		}
	}
}

// TestSearchBatchEqualsSearch: a batch of queries (a match, a non-match, a
// repeat) answered in one pass over the gallery gives each query's own
// Search bytes, in every mode: held in memory, and streamed under a budget
// nothing fits (one query per pass) and under one all fit (one pass); an
// empty, oversized or corrupt batch is refused.
func TestSearchBatchEqualsSearch(t *testing.T) {
	rng := rand.New(rand.NewSource(41))
	const dim, delta, width = 32, 0.5, 2
	f := newPayloadFixture(t, params.Toy, 12, dim, 0, delta, width, "")
	q := randomUnit(rng, dim)
	gal := gallery(rng, q, 2600, crowdOutsideTheBand(t, rng, 12, delta, 6, 6, 0.3))
	f.enrollPayloads(t, gal, randomPayloads(rng, len(gal), width), false)
	var queries [][]byte
	for _, v := range [][]float64{q, randomUnit(rng, dim), q} {
		qb, err := f.client.EncryptQuery(f32(v))
		if err != nil {
			t.Fatal(err)
		}
		queries = append(queries, qb)
	}
	for _, c := range []struct {
		streamed bool
		budget   int64 // the streamed server's, 0: as opened (1 byte)
		limit    int
	}{{false, 0, 1}, {true, 0, 1}, {true, 1 << 40, MaxBatch}} {
		streamed := c.streamed
		srv := f.open(t, streamed)
		if c.budget > 0 {
			srv.budget = c.budget
		}
		if limit := srv.BatchLimit(); limit != c.limit {
			t.Fatalf("streamed %v, budget %d: batch limit %d, want %d", streamed, srv.budget, limit, c.limit)
		}
		for _, mode := range []result.Mode{result.Membership, result.Identification, result.Payload} {
			outs, st, err := srv.SearchBatch(queries, mode, SearchOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(outs) != len(queries) || st.Queries != len(queries) {
				t.Fatalf("%d results, stats of %d queries", len(outs), st.Queries)
			}
			for i, qb := range queries {
				one, _, err := srv.Search(qb, mode, SearchOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(outs[i], one) {
					t.Fatalf("streamed %v, %s: query %d's batched result differs from its own search", streamed, mode, i)
				}
			}
		}
		bad := append([]byte(nil), queries[1]...)
		bad[len(bad)/2] ^= 0xff
		for _, batch := range [][][]byte{nil, make([][]byte, MaxBatch+1), {queries[0], bad}} {
			if _, _, err := srv.SearchBatch(batch, result.Membership, SearchOptions{}); err == nil {
				t.Fatalf("a batch of %d queries was accepted", len(batch))
			}
		}
		if _, _, err := srv.Search(queries[0], result.Membership, SearchOptions{Bound: 4}); !errors.Is(err, errs.ErrInvalid) {
			t.Fatalf("a bound outside payload mode: %v", err)
		}
	}
}

// TestBudgetWithoutRoomForProgramsKeepsLattigo: a memory budget that holds
// the groups in memory but not the comparator programs' buffers keeps
// Lattigo's sequential evaluator (nothing recorded); one with room records.
func TestBudgetWithoutRoomForProgramsKeepsLattigo(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("one core: the comparator runs sequentially")
	}
	rng := rand.New(rand.NewSource(43))
	const dim = 32
	f := newFixture(t, params.Toy, 7, dim, 0.5)
	q := randomUnit(rng, dim)
	f.enroll(t, gallery(rng, q, 300, nil))
	probe := f.open(t, false)
	need := probe.residentBytes(probe.keys) + probe.runnerBytes()
	query, err := f.client.EncryptQuery(f32(q))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		budget   int64
		programs int
	}{{need - 1, 0}, {need, 1}} {
		srv, err := Open(f.indexDir, f.serverKeys(), Options{MemoryBudget: c.budget})
		if err != nil {
			t.Fatal(err)
		}
		if srv.Streamed {
			t.Fatalf("budget %d: streamed", c.budget)
		}
		if _, _, err := srv.Search(query, result.Identification, SearchOptions{}); err != nil {
			t.Fatal(err)
		}
		if n := srv.WaitComparators(); n != c.programs {
			t.Fatalf("budget %d (need %d): %d programs, want %d", c.budget, need, n, c.programs)
		}
	}
}
