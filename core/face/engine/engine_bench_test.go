package engine

import (
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"testing"

	"encmatch/core/base/params"
	"encmatch/core/face/client"
	"encmatch/core/face/index"
	"encmatch/core/face/keys"
	"encmatch/core/face/result"
	"encmatch/core/face/strategy"
)

// BenchmarkSearch measures membership and identification at the secure
// parameters, the comparator on Lattigo's sequential evaluator (cmp=lattigo)
// and on every core (cmp=recorded), side by side; every answer is decrypted
// (untimed) and compared with brute force. Environment: ENCMATCH_BENCH_DIM (default 192), ENCMATCH_BENCH_K
// (one size, default 16384), ENCMATCH_BENCH_STRATEGY (default dg) and
// ENCMATCH_BENCH_N1 (0 = default), ENCMATCH_BENCH_BUDGET (server memory
// budget in bytes, 0 = unlimited), ENCMATCH_BENCH_DIR (keeps keys and
// indexes between runs, so that a second run measures a server that did no
// key generation or enrollment; default a temporary directory),
// ENCMATCH_BENCH_SETUP_ONLY (make keys and index, measure nothing),
// ENCMATCH_BENCH_KAPPA (comparator depth, default params.DefaultKappa),
// ENCMATCH_BENCH_PRESET (a secure preset: default, or real), ENCMATCH_BENCH_FOLD
// (a folded key set: each vector's halves in complex slots), ENCMATCH_BENCH_SEEDED
// (enroll as the key owner: secret key, seeded uniform halves),
// ENCMATCH_BENCH_CMP (lattigo or recorded: one comparator only),
// ENCMATCH_BENCH_BATCH (k > 1: also SearchBatch of k queries, membership),
// ENCMATCH_BENCH_NO_WARMUP (no untimed query before each mode's benchmark,
// for galleries streamed from disk, where a warm-up cannot warm anything and
// a query takes minutes; the benchmark's own first run still precedes the
// reported ones).
//
//	go test -run '^$' -bench Search -benchtime 3x ./engine/
func BenchmarkSearch(b *testing.B) {
	dim := envInt("ENCMATCH_BENCH_DIM", 192)
	k := envInt("ENCMATCH_BENCH_K", 16384)
	name := os.Getenv("ENCMATCH_BENCH_STRATEGY")
	if name == "" {
		name = strategy.DG
	}
	dir := os.Getenv("ENCMATCH_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	kappa := envInt("ENCMATCH_BENCH_KAPPA", params.DefaultKappa)
	preset := os.Getenv("ENCMATCH_BENCH_PRESET")
	if preset == "" {
		preset = params.Default
	}
	set, err := params.New(preset, kappa, dim)
	if err != nil {
		b.Fatal(err)
	}
	if os.Getenv("ENCMATCH_BENCH_FOLD") != "" {
		if set, err = set.WithFold(true); err != nil {
			b.Fatal(err)
		}
	}
	if set.Insecure {
		b.Fatalf("preset %q is insecure: benchmarks run at the secure presets", preset)
	}
	strat, err := strategy.New(name, envInt("ENCMATCH_BENCH_N1", 0), set.L())
	if err != nil {
		b.Fatal(err)
	}
	tag := fmt.Sprintf("%d-k%d", dim, kappa)
	if set.Fold {
		tag += "-folded"
	}
	if preset != params.Default {
		tag = preset + "-" + tag
	}
	keyDir := filepath.Join(dir, fmt.Sprintf("keys-%s-%s-%d", tag, strat.Name, strat.N1))
	if _, err := os.Stat(keyDir); os.IsNotExist(err) {
		sum, err := keys.Generate(keyDir, set, strat)
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("keygen: %d rotation keys, %.2f GB, %.1f s", sum.RotationKeys, float64(sum.ServerKeyBytes)/1e9, sum.Seconds)
	}
	srvKeys := filepath.Join(keyDir, keys.ServerDir)
	seededStore := os.Getenv("ENCMATCH_BENCH_SEEDED") != ""
	idxDir := filepath.Join(dir, fmt.Sprintf("index-%s-%d-%s-%d", tag, k, strat.Name, strat.N1))
	if seededStore {
		idxDir += "-seeded"
	}
	const delta = 0.5
	rng := rand.New(rand.NewSource(1))
	data := make([]float32, k*dim)
	for i := range data {
		data[i] = float32(rng.NormFloat64())
	}
	q := make([]float32, dim)
	for i := range q {
		q[i] = float32(i%7) - 3
	}
	var exact []int // brute force, to check the decrypted answers
	for i := 0; i < k; i++ {
		if cosine(q, data[i*dim:(i+1)*dim]) >= delta {
			exact = append(exact, i)
		}
	}
	if _, err := os.Stat(idxDir); os.IsNotExist(err) {
		if _, err := index.Create(idxDir, srvKeys, delta, index.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		sum, err := enrollBench(keyDir, idxDir, data, k, dim, seededStore)
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("enroll K=%d (seeded=%v): %.1f s, %.2f GB, %.1f KB per entry", k, seededStore, sum.Seconds, float64(sum.Bytes)/1e9, float64(sum.Bytes)/float64(k)/1e3)
	}
	data = nil // not counted in the server's peak RSS
	runtime.GC()
	debug.FreeOSMemory()
	if os.Getenv("ENCMATCH_BENCH_SETUP_ONLY") != "" {
		b.Skip("setup only: keys and index are in place")
	}
	c, err := client.Open(keyDir)
	if err != nil {
		b.Fatal(err)
	}
	qb, err := c.EncryptQuery(q)
	if err != nil {
		b.Fatal(err)
	}
	warmUp := os.Getenv("ENCMATCH_BENCH_NO_WARMUP") == ""
	// The comparator on Lattigo's sequential evaluator, then on every core
	// (its program recorded after the warm-up), each on a server of its own.
	variants := map[string][]bool{"": {true, false}, "lattigo": {true}, "recorded": {false}}[os.Getenv("ENCMATCH_BENCH_CMP")]
	batch := envInt("ENCMATCH_BENCH_BATCH", 1)
	for _, sequential := range variants {
		srv, err := Open(idxDir, srvKeys, Options{MemoryBudget: int64(envInt("ENCMATCH_BENCH_BUDGET", 0)), SequentialComparator: sequential})
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("%v: streamed=%v", strat, srv.Streamed)
		cmpName := map[bool]string{true: "lattigo", false: "recorded"}[sequential]
		for _, mode := range []result.Mode{result.Membership, result.Identification} {
			if warmUp {
				if _, _, err := srv.Search(qb, mode, SearchOptions{}); err != nil { // not timed
					b.Fatal(err)
				}
				srv.WaitComparators()
			}
			b.Run(fmt.Sprintf("%s/%s/n1=%d/dim=%d/kappa=%d/K=%d/cmp=%s", mode, strat.Name, strat.N1, dim, kappa, k, cmpName), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					res, st, err := srv.Search(qb, mode, SearchOptions{})
					if err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					checkBenchResult(b, c, res, exact)
					b.StartTimer()
					b.ReportMetric(st.Rotations, "rot-s")
					b.ReportMetric(st.Similarity, "sim-s")
					b.ReportMetric(st.Comparison, "cmp-s")
					b.ReportMetric(st.Aggregation, "agg-s")
					b.ReportMetric(float64(st.ComparatorCores), "cmp-cores")
				}
			})
		}
		if batch > 1 {
			benchBatch(b, srv, c, q, batch, exact, cmpName)
		}
		srv = nil
		runtime.GC()
	}
}

// benchBatch times SearchBatch of batch encryptions of q (membership), one
// pass over the gallery for as many as the server's budget allows, and
// reports the seconds per query and the queries per pass.
func benchBatch(b *testing.B, srv *Server, c *client.Client, q []float32, batch int, exact []int, cmpName string) {
	queries := make([][]byte, batch)
	for i := range queries {
		var err error
		if queries[i], err = c.EncryptQuery(q); err != nil {
			b.Fatal(err)
		}
	}
	b.Run(fmt.Sprintf("membership/batch=%d/cmp=%s", batch, cmpName), func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			outs, st, err := srv.SearchBatch(queries, result.Membership, SearchOptions{})
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			for _, res := range outs {
				checkBenchResult(b, c, res, exact)
			}
			b.StartTimer()
			b.ReportMetric(st.Seconds/float64(batch), "s/query")
			b.ReportMetric(float64(srv.BatchLimit()), "queries/pass")
		}
	})
}

// checkBenchResult decrypts a result and compares it with the brute-force
// matches (the random gallery has no score near delta).
func checkBenchResult(b *testing.B, c *client.Client, res []byte, exact []int) {
	d, err := c.Decrypt(res)
	if err != nil {
		b.Fatal(err)
	}
	if d.Mode == result.Membership && math.Abs(d.RawCount-float64(len(exact))) > 0.5 {
		b.Fatalf("membership count %.3f, brute force %d", d.RawCount, len(exact))
	}
	if d.Mode == result.Identification && fmt.Sprint(d.Matches) != fmt.Sprint(exact) && !(len(exact) == 0 && len(d.Matches) == 0) {
		b.Fatalf("identification %v, brute force %v", d.Matches, exact)
	}
}

// enrollBench enrolls as an enroller with the public key, or as the key
// owner (seeded).
func enrollBench(keyDir, idxDir string, data []float32, k, dim int, seededStore bool) (*index.EnrollSummary, error) {
	if seededStore {
		owner, err := keys.LoadClient(keyDir)
		if err != nil {
			return nil, err
		}
		return index.EnrollSeeded(idxDir, owner, data, k, dim, index.EnrollOptions{})
	}
	pub, err := keys.LoadPublic(filepath.Join(keyDir, keys.ServerDir))
	if err != nil {
		return nil, err
	}
	return index.Enroll(idxDir, pub, data, k, dim, index.EnrollOptions{})
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
