package engine

import (
	"errors"
	"math"
	"math/rand"
	"reflect"
	"testing"

	"encmatch/core/base/errs"
	"encmatch/core/base/params"
	"encmatch/core/face/client"
	"encmatch/core/face/result"
	"encmatch/core/face/strategy"
)

// TestShardsMergeToTheFullAnswer splits a three-group index into two shards
// (one in memory, one streamed), searches each, merges the partial results
// and checks that the merged answer equals the unsharded one, and that a
// partial answer is refused at decryption, never taken for a whole one.
func TestShardsMergeToTheFullAnswer(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	const dim, delta = 24, 0.5
	f := newFixtureWith(t, params.Toy, 8, dim, delta, strategy.BSGSTBE, 8)
	q := randomUnit(rng, dim)
	gal := gallery(rng, q, 1500, []float64{0.9, 0.55, 0.51, 0.49, 1.0})
	f.enroll(t, gal[:600])
	f.enrollNewGroup(t, gal[600:1100], true)
	f.enrollNewGroup(t, gal[1100:], false)
	full, shardA, shardB := f.openShards(t)
	if !shardB.Streamed || len(shardA.Served()) != 2 {
		t.Fatalf("shard B streamed %v, shard A serves %d groups", shardB.Streamed, len(shardA.Served()))
	}
	qb, err := f.client.EncryptQuery(f32(q))
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []result.Mode{result.Identification, result.Membership} {
		whole, _, err := full.Search(qb, mode, SearchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want, err := f.client.Decrypt(whole)
		if err != nil {
			t.Fatal(err)
		}
		var parts []*result.Result
		for _, shard := range []*Server{shardA, shardB} {
			b, _, err := shard.Search(qb, mode, SearchOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.client.Decrypt(b); !errors.Is(err, errs.ErrInvalid) {
				t.Fatalf("%s: a shard's partial result decrypted (err %v)", mode, err)
			}
			r, err := result.Unmarshal(b, full.Manifest.Header(""), f.set.CKKS)
			if err != nil {
				t.Fatal(err)
			}
			parts = append(parts, r)
		}
		got := mergeAndDecrypt(t, f, full, parts)
		if !reflect.DeepEqual(got.Matches, want.Matches) || got.Count != want.Count || math.Abs(got.RawCount-want.RawCount) > 1e-3 {
			t.Errorf("%s: merged %v/%d (%.5f), whole %v/%d (%.5f)", mode, got.Matches, got.Count, got.RawCount, want.Matches, want.Count, want.RawCount)
		}
		if _, err := result.Merge(f.set.CKKS, []*result.Result{parts[0], parts[0]}); !errors.Is(err, errs.ErrCorrupt) {
			t.Errorf("%s: overlapping shards merged (err %v)", mode, err)
		}
	}
	for _, bad := range [][]int{{}, {3}, {-1}, {1, 1}} {
		if _, err := Open(f.indexDir, f.serverKeys(), Options{Groups: bad}); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("groups %v: %v", bad, err)
		}
	}
}

// TestMergeRefusesMixedResults: results of other modes or thresholds do not
// merge.
func TestMergeRefusesMixedResults(t *testing.T) {
	rng := rand.New(rand.NewSource(12))
	const dim = 24
	f := newFixtureWith(t, params.Toy, 8, dim, 0.5, strategy.BSGSTBE, 8)
	f.enroll(t, gallery(rng, randomUnit(rng, dim), 100, nil))
	f.enrollNewGroup(t, gallery(rng, randomUnit(rng, dim), 100, nil), false)
	qb, err := f.client.EncryptQuery(f32(randomUnit(rng, dim)))
	if err != nil {
		t.Fatal(err)
	}
	open := func(g int) *Server {
		s, err := Open(f.indexDir, f.serverKeys(), Options{Groups: []int{g}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := open(0), open(1)
	search := func(s *Server, mode result.Mode) *result.Result {
		out, _, err := s.Search(qb, mode, SearchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r, err := result.Unmarshal(out, s.Manifest.Header(""), f.set.CKKS)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// No search can name another threshold; a part that claims one (made
	// for another index, or edited) is still refused.
	otherDelta := search(b, result.Membership)
	otherDelta.Delta = 0.6
	for _, pair := range [][2]*result.Result{
		{search(a, result.Membership), search(b, result.Identification)},
		{search(a, result.Membership), otherDelta},
	} {
		if _, err := result.Merge(f.set.CKKS, pair[:]); !errors.Is(err, errs.ErrMismatch) {
			t.Errorf("mixed results merged (err %v)", err)
		}
	}
}

// TestPublicKeyQuery: a query encrypted under the public key alone (a
// Querier, as for a threshold key set) gets the same answer as the key
// holder's.
func TestPublicKeyQuery(t *testing.T) {
	rng := rand.New(rand.NewSource(13))
	const dim, delta = 24, 0.5
	f := newFixtureWith(t, params.Toy, 8, dim, delta, strategy.BSGSTBE, 8)
	q := randomUnit(rng, dim)
	gal := gallery(rng, q, 700, []float64{0.9, 0.6, 0.45})
	f.enroll(t, gal)
	var exact []int
	for i, g := range gal {
		if s := cosine(f32(q), g); s >= delta {
			exact = append(exact, i)
		} else if math.Abs(s-delta) < 1e-3 {
			t.Fatalf("entry %d scores %.5f, too close to delta for an exact check", i, s)
		}
	}
	srv, err := Open(f.indexDir, f.serverKeys(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	querier, err := client.OpenQuerier(f.serverKeys())
	if err != nil {
		t.Fatal(err)
	}
	if querier.Dim() != dim {
		t.Fatalf("querier dimension %d", querier.Dim())
	}
	var answers [][]int
	for _, enc := range []func([]float32) ([]byte, error){f.client.EncryptQuery, querier.EncryptQuery} {
		qb, err := enc(f32(q))
		if err != nil {
			t.Fatal(err)
		}
		out, _, err := srv.Search(qb, result.Identification, SearchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := f.client.Decrypt(out)
		if err != nil {
			t.Fatal(err)
		}
		answers = append(answers, got.Matches)
	}
	if !reflect.DeepEqual(answers[0], exact) || !reflect.DeepEqual(answers[1], exact) {
		t.Fatalf("secret-key query %v, public-key query %v, brute force %v", answers[0], answers[1], exact)
	}
	if _, err := querier.EncryptQuery(make([]float32, dim)); !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("zero query: %v", err)
	}
}

// openShards opens a three-group index whole, and as two shards: groups 2
// and 0 in memory, group 1 streamed.
func (f *fixture) openShards(t *testing.T) (full, shardA, shardB *Server) {
	t.Helper()
	var err error
	if full, err = Open(f.indexDir, f.serverKeys(), Options{}); err != nil {
		t.Fatal(err)
	}
	if shardA, err = Open(f.indexDir, f.serverKeys(), Options{Groups: []int{2, 0}}); err != nil {
		t.Fatal(err)
	}
	if shardB, err = Open(f.indexDir, f.serverKeys(), Options{Groups: []int{1}, MemoryBudget: 1}); err != nil {
		t.Fatal(err)
	}
	return full, shardA, shardB
}

// shardResult searches one shard and decodes its partial result.
func shardResult(t *testing.T, shard *Server, qb []byte, mode result.Mode, opt SearchOptions) *result.Result {
	t.Helper()
	b, _, err := shard.Search(qb, mode, opt)
	if err != nil {
		t.Fatal(err)
	}
	r, err := result.Unmarshal(b, shard.Manifest.Header(""), shard.Params.CKKS)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// mergeAndDecrypt merges the shards' results, frames the merge as full's
// result and decrypts it.
func mergeAndDecrypt(t *testing.T, f *fixture, full *Server, parts []*result.Result) *result.Answer {
	t.Helper()
	merged, err := result.Merge(f.set.CKKS, parts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := result.Marshal(full.Manifest.Header(""), merged)
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.client.Decrypt(b)
	if err != nil {
		t.Fatal(err)
	}
	return got
}
