package keys

import (
	"os"
	"testing"
)

// BenchmarkLoadEvaluation loads the evaluation keys of the server key
// directory named by ENCMATCH_BENCH_KEYS (skipped when unset): the cost a
// one-shot command pays before its first search. The bytes per second
// are the directory's size over the time.
func BenchmarkLoadEvaluation(b *testing.B) {
	dir := os.Getenv("ENCMATCH_BENCH_KEYS")
	if dir == "" {
		b.Skip("set ENCMATCH_BENCH_KEYS to a server key directory")
	}
	b.SetBytes(dirBytes(dir))
	for i := 0; i < b.N; i++ {
		if _, err := LoadEvaluation(dir); err != nil {
			b.Fatal(err)
		}
	}
}
