package index

import (
	"os"
	"path/filepath"
	"testing"

	"encmatch/core/base/params"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
)

// benchIndex opens the index named by ENCMATCH_BENCH_INDEX, skipping the
// benchmark when it is unset.
func benchIndex(b *testing.B) (string, *Manifest, *params.Set) {
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
	return dir, m, set
}

// BenchmarkLoadGroups loads every group of the index named by
// ENCMATCH_BENCH_INDEX (skipped when unset) into memory, as a server that
// holds its groups does when it opens: the bytes per second are the group
// files' size over the time.
func BenchmarkLoadGroups(b *testing.B) {
	dir, m, set := benchIndex(b)
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

// BenchmarkStreamGroups streams every group of the index named by
// ENCMATCH_BENCH_INDEX (skipped when unset) as a server that streams its
// groups does, on one goroutine: read, checked (CRC-32C, layout) and
// decoded in chunks of 32, and a seeded group's uniform halves regenerated
// (Masks.Complete, which the server's workers do). core-s/ct is the
// seconds of one core per diagonal, the strategy model's
// Costs.StreamDecode (whole or stored halves) and Costs.StreamMask (the
// regeneration alone, "masks").
func BenchmarkStreamGroups(b *testing.B) {
	dir, m, set := benchIndex(b)
	stream := func(b *testing.B, complete bool) {
		var cts int
		for range b.N {
			for _, g := range m.Groups {
				err := StreamGroupStoredHalves(dir, m, set, g, 32, func(first int, chunk []*rlwe.Ciphertext, masks *Masks) error {
					cts += len(chunk)
					if !complete || masks == nil {
						return nil
					}
					for i, ct := range chunk {
						if err := masks.Complete(first+i, ct); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(b.Elapsed().Seconds()/float64(cts), "core-s/ct")
	}
	b.Run("decode", func(b *testing.B) { stream(b, false) })
	if len(m.Groups) > 0 && m.Groups[0].Seeded {
		b.Run("decode-and-masks", func(b *testing.B) { stream(b, true) })
	}
}
