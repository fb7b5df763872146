package index

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkLoadGroups loads every group of the index named by
// ENCMATCH_BENCH_INDEX (skipped when unset) into memory, as a server that
// holds its groups does when it opens: the bytes per second are the group
// files' size over the time.
func BenchmarkLoadGroups(b *testing.B) {
	dir := os.Getenv("ENCMATCH_BENCH_INDEX")
	if dir == "" {
		b.Skip("set ENCMATCH_BENCH_INDEX to an index directory")
	}
	m, err := Load(dir)
	if err != nil {
		b.Fatal(err)
	}
	set, err := m.ParamSet()
	if err != nil {
		b.Fatal(err)
	}
	var size int64
	for _, g := range m.Groups {
		st, err := os.Stat(filepath.Join(dir, g.File))
		if err != nil {
			b.Fatal(err)
		}
		size += st.Size()
	}
	b.SetBytes(size)
	for i := 0; i < b.N; i++ {
		for _, g := range m.Groups {
			if _, err := LoadGroup(dir, m, set, g); err != nil {
				b.Fatal(err)
			}
		}
	}
}
