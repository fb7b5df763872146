package strategy

import (
	"math"
	"sort"
	"testing"

	"encmatch/core/kernels"
)

// TestRotationSetsCoverEveryDiagonal checks, for every strategy and n1,
// that the key rotations compose every rotation 0..l-1 the way the engine
// builds them (baby + giant) and that only tbs needs negative rotations.
func TestRotationSetsCoverEveryDiagonal(t *testing.T) {
	for _, l := range []int{16, 256, 512} {
		for _, name := range Names {
			for _, n1 := range []int{0, 3, 8, l} {
				s, err := New(name, n1, l)
				if err != nil {
					t.Fatal(err)
				}
				have := map[int]bool{0: true}
				for _, r := range s.Rotations() {
					have[r] = true
					if r < 0 && !s.PreRotatedByServer() {
						t.Errorf("%v: negative rotation %d", s, r)
					}
				}
				for i := 0; i < l; i++ {
					b, g := i%s.N1, i-i%s.N1
					if !have[b] || !have[g] {
						t.Fatalf("%v: diagonal %d needs rotations %d and %d", s, i, b, g)
					}
					if s.PreRotatedByServer() && !have[s.PreRotation(i)] {
						t.Fatalf("%v: pre-rotation %d missing", s, s.PreRotation(i))
					}
				}
			}
		}
	}
}

func TestKeyCounts(t *testing.T) {
	dg, _ := New(DG, 0, 512)
	bs, _ := New(BSGSDiagonal, 0, 512)
	tbs, _ := New(BSGSTBS, 0, 512)
	if len(dg.Rotations()) != 511 || bs.N1 != 32 || len(bs.Rotations()) != 31+15 || len(tbs.Rotations()) != 31+30 {
		t.Fatalf("keys: dg %d, bsgs %d (n1 %d), tbs %d", len(dg.Rotations()), len(bs.Rotations()), bs.N1, len(tbs.Rotations()))
	}
	tbe, _ := New(BSGSTBE, 32, 512)
	if got := tbe.KeyCount(1 << 14); got != 46+5 {
		t.Fatalf("bsgs-tbe n1=32: %d keys, want 46 + 5 inner-sum keys", got)
	}
	if _, err := New("fft", 0, 512); err == nil {
		t.Fatal("unknown strategy accepted")
	}
	if _, err := New(BSGSTBE, 600, 512); err == nil {
		t.Fatal("n1 > l accepted")
	}
}

func TestChooseRespectsBudgetAndGallerySize(t *testing.T) {
	c := CostsFor(kernels.Scalar)
	small, all, err := Choose(512, 1, 2, 0, c)
	if err != nil || len(all) < 10 {
		t.Fatal(err)
	}
	if small.Name == DG || small.FullTable() {
		t.Errorf("one group: expected a baby-step strategy (fewest rotations per query), got %v", small.Strategy)
	}
	// Candidates come sorted by time, then keys.
	if !sort.SliceIsSorted(all, func(i, j int) bool { return all[i].QuerySeconds < all[j].QuerySeconds*0.95 }) && all[0].QuerySeconds > all[1].QuerySeconds*1.05 {
		t.Error("candidates not ranked by time")
	}
	// At kappa 13 the 51 rotation keys alone are 2.4 GB: the smallest
	// streaming footprint (n1 = 16) is about 4.15 GB with the runtime's
	// headroom, so a 4.5 GB budget leaves one choice or two.
	tight, _, err := Choose(512, 64, 2, 4.5e9, c)
	if err != nil {
		t.Fatal(err)
	}
	if tight.MemoryBytes > 4.5e9 || tight.PreRotatedByServer() || !tight.Streamed {
		t.Errorf("4.5 GB budget at 64 groups: chose %v using %.1f GB (streamed %v)", tight.Strategy, float64(tight.MemoryBytes)/1e9, tight.Streamed)
	}
	if _, _, err := Choose(512, 64, 2, 4e9, c); err == nil {
		t.Error("4 GB at kappa 13: the model should find no strategy (keys 2.4 GB + streaming window + headroom)")
	}
	if _, _, err := Choose(512, 64, 2, 1e8, c); err == nil {
		t.Error("an impossible budget was accepted")
	}
}

// TestFoldedEstimate: a folded layout halves the block (fewer products and
// giant steps) and adds, per group, the real part's rotation and its key.
func TestFoldedEstimate(t *testing.T) {
	plain, _ := New(BSGSTBE, 32, 512)
	folded, _ := New(BSGSTBE, 32, 256)
	c := CostsFor(kernels.Scalar)
	p := plain.Estimate(4, 2, 0, c)
	f := folded.Estimate(4, 2, 0, c.Folded())
	noConj := folded.Estimate(4, 2, 0, c)
	if f.Keys != noConj.Keys+1 {
		t.Fatalf("folded keys %d, want %d + the conjugation", f.Keys, noConj.Keys)
	}
	// The first group's whole, the three others' overlapped.
	if d, want := f.QuerySeconds-noConj.QuerySeconds, (1+3*c.Overlap)*c.Rotate/2; math.Abs(d-want) > 1e-12 {
		t.Fatalf("the real part adds %v s for 4 groups on 2 workers, want %v", d, want)
	}
	if !(f.QuerySeconds < p.QuerySeconds && f.MemoryBytes < p.MemoryBytes) {
		t.Fatalf("folded %+v is not cheaper than plain %+v", f, p)
	}
}

// TestGroupsOverlap: the first group's products and the last comparator
// are counted whole (the comparator on every core in memory, on one when
// streamed), every other group adds Overlap of its products and
// comparator over the workers, and one worker overlaps nothing; every
// kernel set has measured costs, and an unknown one gets the scalar set's.
func TestGroupsOverlap(t *testing.T) {
	s, _ := New(BSGSTBE, 32, 256)
	c := CostsFor(kernels.AVX512IFMA).Folded()
	one := s.Estimate(1, 2, 0, c)
	four := s.Estimate(4, 2, 0, c)
	group := 256*c.MulAdd + c.Relinearize + 7*c.GiantStep + c.RealPart
	baby := c.Decompose + 31*c.HoistedRotate
	if want := baby/2 + group/2 + c.Comparator*(c.ComparatorSerial+(1-c.ComparatorSerial)/2) + c.InnerSum; math.Abs(one.QuerySeconds-want) > 1e-9 {
		t.Errorf("one group: %v s, want %v", one.QuerySeconds, want)
	}
	if want := one.QuerySeconds + 3*c.Overlap*(group+c.Comparator)/2; math.Abs(four.QuerySeconds-want) > 1e-9 {
		t.Errorf("four groups: %v s, want %v", four.QuerySeconds, want)
	}
	if got, want := s.Estimate(4, 1, 0, c).QuerySeconds, baby+4*(group+c.Comparator)+c.InnerSum; math.Abs(got-want) > 1e-9 {
		t.Errorf("four groups on one worker: %v s, want %v", got, want)
	}
	for _, k := range []kernels.Set{kernels.Scalar, kernels.AVX2, kernels.AVX512IFMA} {
		m, ok := MeasuredCosts[k]
		if !ok || m.Comparator <= 0 || m.ComparatorSerial < 0 || m.ComparatorSerial > 1 || m.Overlap <= 0 || m.Overlap > 1 ||
			m.MulAdd <= 0 || m.StreamDecode <= 0 || m.CiphertextBytes <= 0 {
			t.Errorf("kernel set %s: costs missing or out of range: %+v", k, m)
		}
	}
	if CostsFor("no-such-set") != MeasuredCosts[kernels.Scalar] {
		t.Error("an unknown kernel set should get the scalar costs")
	}
}

// TestStreamedEstimate: a streamed gallery adds the cores' time to check,
// decode (and, seeded, complete) every diagonal to the computation, and is
// bounded below by the disk; a seeded store reads half the bytes.
func TestStreamedEstimate(t *testing.T) {
	s, _ := New(BSGSTBE, 32, 256)
	c := CostsFor(kernels.AVX512IFMA).Folded()
	c.DiskBytesPerSecond = 1e12 // the cores bound it, not the disk
	const groups, workers, budget = 8, 2, 4e9
	mem := s.Estimate(groups, workers, 0, c)
	pub := s.Estimate(groups, workers, budget, c)
	seed := s.Estimate(groups, workers, budget, c.Seeded())
	if mem.Streamed || !pub.Streamed || !seed.Streamed {
		t.Fatalf("streamed: in memory %v, public %v, seeded %v", mem.Streamed, pub.Streamed, seed.Streamed)
	}
	diagonals := float64(groups * 256)
	// Streamed, the last comparator runs on one core.
	base := mem.QuerySeconds - c.Comparator*(c.ComparatorSerial+(1-c.ComparatorSerial)/workers) + c.Comparator
	if want := base + diagonals*c.StreamDecode/workers; math.Abs(pub.QuerySeconds-want) > 1e-9 {
		t.Errorf("public-key store streamed: %v s, want %v", pub.QuerySeconds, want)
	}
	if want := base + diagonals*(c.StreamDecodeHalf+c.StreamMask)/workers; math.Abs(seed.QuerySeconds-want) > 1e-9 {
		t.Errorf("seeded store streamed: %v s, want %v", seed.QuerySeconds, want)
	}
	slow := c
	slow.DiskBytesPerSecond = 1e8
	if got, want := s.Estimate(groups, workers, budget, slow).QuerySeconds, diagonals*float64(c.CiphertextBytes)/1e8; math.Abs(got-want) > 1e-9 {
		t.Errorf("a slow disk: %v s, want the read time %v", got, want)
	}
	slow.StoredBytes = c.CiphertextBytes / 4
	if got, want := s.Estimate(groups, workers, budget, slow.Seeded()).QuerySeconds, diagonals*float64(c.CiphertextBytes/4)/1e8; math.Abs(got-want) > 1e-9 {
		t.Errorf("a slow disk, stored bytes given: %v s, want %v", got, want)
	}
}

// TestTableAndChunkSizes: the full-table strategies keep all l rotations
// and stream 32 diagonals at a time (fewer when l is smaller); tbs and tbe
// keep and stream n1.
func TestTableAndChunkSizes(t *testing.T) {
	for _, c := range []struct {
		name         string
		n1, l        int
		table, chunk int
	}{
		{DG, 0, 256, 256, 32}, {BSGSDiagonal, 16, 256, 256, 32}, {DG, 0, 16, 16, 16},
		{BSGSTBE, 32, 256, 32, 32}, {BSGSTBS, 8, 256, 8, 8},
	} {
		s, err := New(c.name, c.n1, c.l)
		if err != nil {
			t.Fatal(err)
		}
		if s.TableSize() != c.table || s.ChunkSize() != c.chunk {
			t.Errorf("%s n1 %d l %d: table %d chunk %d, want %d and %d", c.name, c.n1, c.l, s.TableSize(), s.ChunkSize(), c.table, c.chunk)
		}
	}
}
