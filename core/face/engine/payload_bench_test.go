package engine

import (
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
	"time"

	"encmatch/core/base/params"
	"encmatch/core/face/client"
	"encmatch/core/face/index"
	"encmatch/core/face/keys"
	"encmatch/core/face/result"
	"encmatch/core/face/strategy"
)

// BenchmarkPayloadWorkload runs the HomomorphicEncryption.org "fetch by
// similarity" workload at the secure default preset with the payload
// level: ENCMATCH_BENCH_RECORDS records (default 1,000) of 128-d unit
// vectors with 7 int16 payloads, threshold t = 0.5 with rule ">", bound 32,
// a probe with 12 planted matches (cosines 0.55 to 0.95). It reports, once,
// the time of each stage (keygen, encrypt DB, server preprocessing: loading
// keys and groups) and the bytes of keys and DB; then per iteration one
// count query (membership) and one payload query, each timed from the
// query's encryption to its decryption, stage by stage; every answer is
// checked against brute force. Peak RSS is the process's (run one size per
// process). ENCMATCH_BENCH_PLAIN=1 runs the count query alone on a key set
// without the payload level and an index without payloads: the price of
// the level on a count query.
//
//	ENCMATCH_BENCH_RECORDS=50000 go test -run '^$' -bench PayloadWorkload -benchtime 3x -timeout 60m ./engine/
func BenchmarkPayloadWorkload(b *testing.B) {
	const dim, width, delta, bound = 128, 7, 0.5, 32
	n := envInt("ENCMATCH_BENCH_RECORDS", 1000)
	withPayload := os.Getenv("ENCMATCH_BENCH_PLAIN") == ""
	modes := []result.Mode{result.Membership, result.Payload}
	w := width
	if !withPayload {
		modes, w = modes[:1], 0
	}
	set, err := params.NewWith(params.Default, params.DefaultKappa, dim, withPayload)
	if err != nil {
		b.Fatal(err)
	}
	strat, err := strategy.New(strategy.BSGSTBE, 16, set.L())
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	keyDir, indexDir := filepath.Join(dir, "keys"), filepath.Join(dir, "index")
	t0 := time.Now()
	sum, err := keys.Generate(keyDir, set, strat)
	if err != nil {
		b.Fatal(err)
	}
	keygen := time.Since(t0).Seconds()
	srvKeys := filepath.Join(keyDir, keys.ServerDir)
	if _, err := index.Create(indexDir, srvKeys, delta, index.CreateOptions{PayloadWidth: w, Rule: index.RuleAbove}); err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewSource(2026))
	q := randomUnit(rng, dim)
	var planted []float64
	for i := 0; i < 12; i++ {
		planted = append(planted, 0.55+0.4*float64(i)/11)
	}
	gal := gallery(rng, q, n-len(planted), planted)
	pay := randomPayloads(rng, n, width)
	enrolled := pay
	if !withPayload {
		enrolled = nil
	}
	owner, err := keys.LoadClient(keyDir)
	if err != nil {
		b.Fatal(err)
	}
	t0 = time.Now()
	if _, err := index.EnrollSeeded(indexDir, owner, flatten(gal), n, dim, index.EnrollOptions{Payloads: enrolled}); err != nil {
		b.Fatal(err)
	}
	encryptDB := time.Since(t0).Seconds()
	t0 = time.Now()
	srv, err := Open(indexDir, srvKeys, Options{})
	if err != nil {
		b.Fatal(err)
	}
	preprocess := time.Since(t0).Seconds()
	c, err := client.Open(keyDir)
	if err != nil {
		b.Fatal(err)
	}
	m := *srv.Manifest
	m.PayloadWidth = width
	rows, _ := bruteForcePayloads(&m, gal, pay, f32(q))
	b.Logf("%d records x %d-d, %d groups, %s, strategy %s n1=%d: keygen %.1f s (%d rotation keys, %.2f GB server keys), encrypt DB %.1f s (%.1f MB), server preprocessing %.1f s",
		n, dim, len(srv.Manifest.Groups), set.Label(), strat.Name, strat.N1, keygen, sum.RotationKeys, float64(sum.ServerKeyBytes)/1e9, encryptDB, float64(dirBytes(indexDir))/1e6, preprocess)

	var stages [2]struct{ encrypt, search, decrypt float64 }
	var qBytes, rBytes [2]int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for m, mode := range modes {
			t0 := time.Now()
			qb, err := c.EncryptQuery(f32(q))
			if err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			res, _, err := srv.Search(qb, mode, SearchOptions{Bound: bound})
			if err != nil {
				b.Fatal(err)
			}
			t2 := time.Now()
			ans, err := c.Decrypt(res)
			if err != nil {
				b.Fatal(err)
			}
			t3 := time.Now()
			stages[m].encrypt += t1.Sub(t0).Seconds()
			stages[m].search += t2.Sub(t1).Seconds()
			stages[m].decrypt += t3.Sub(t2).Seconds()
			qBytes[m], rBytes[m] = len(qb), len(res)
			b.StopTimer()
			if ans.Count != len(rows) {
				b.Fatalf("%s: count %d (raw %.4f), brute force %d", mode, ans.Count, ans.RawCount, len(rows))
			}
			if mode == result.Payload {
				got := [][]int16{}
				for _, r := range ans.Records {
					got = append(got, r.Payload)
				}
				if !ans.Complete || !reflect.DeepEqual(got, rows) {
					b.Fatalf("payloads %v (complete %v), brute force %v", got, ans.Complete, rows)
				}
			}
			b.StartTimer()
		}
	}
	b.StopTimer()
	per := float64(b.N)
	for m, mode := range []string{"count", "payload"}[:len(modes)] {
		b.ReportMetric(stages[m].encrypt/per, mode+"-encrypt-s")
		b.ReportMetric(stages[m].search/per, mode+"-server-s")
		b.ReportMetric(stages[m].decrypt/per, mode+"-decrypt-s")
		b.ReportMetric(float64(rBytes[m]), mode+"-result-B")
	}
	b.ReportMetric(float64(qBytes[0]), "query-B")
	b.ReportMetric(keygen, "keygen-s")
	b.ReportMetric(encryptDB, "encrypt-db-s")
	b.ReportMetric(preprocess, "preprocess-s")
	b.ReportMetric(float64(sum.ServerKeyBytes), "server-keys-B")
	b.ReportMetric(float64(dirBytes(indexDir)), "db-B")
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		b.ReportMetric(float64(ru.Maxrss)*1024, "peak-rss-B")
	}
}

// dirBytes is the size of the files under dir.
func dirBytes(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			n += info.Size()
		}
		return nil
	})
	return n
}
