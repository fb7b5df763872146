package payload

import (
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"
)

// spansOf lays out groups of the given counts one after the other.
func spansOf(counts ...int) []Span {
	var out []Span
	start := 0
	for i, c := range counts {
		out = append(out, Span{Index: i, Start: start, Count: c})
		start += c
	}
	return out
}

// gallery draws random payloads for spans.
func gallery(rng *rand.Rand, spans []Span, width int) [][]int16 {
	out := make([][]int16, len(spans))
	for i, sp := range spans {
		out[i] = make([]int16, sp.Count*width)
		for k := range out[i] {
			out[i][k] = int16(rng.IntN(65536) - 32768)
		}
	}
	return out
}

// expected is the brute-force answer for 0/1 bits.
func expected(spans []Span, bits [][]float64, payloads [][]int16, width int) []Record {
	out := []Record{}
	for i, sp := range spans {
		for s := 0; s < sp.Count; s++ {
			if bits[i][s] >= 0.5 {
				out = append(out, Record{Position: sp.Start + s, Payload: payloads[i][s*width : (s+1)*width]})
			}
		}
	}
	sort.Slice(out, func(a, b int) bool {
		for k := range out[a].Payload {
			if out[a].Payload[k] != out[b].Payload[k] {
				return out[a].Payload[k] < out[b].Payload[k]
			}
		}
		return out[a].Position < out[b].Position
	})
	return out
}

// noisy adds to every non-match the comparator's worst error, 2^-21,
// with a random sign, and to every match its complement.
func noisy(rng *rand.Rand, bits [][]float64) {
	for _, b := range bits {
		for s := range b {
			e := 1.0 / (1 << 21)
			if rng.IntN(2) == 0 {
				e = -e
			}
			b[s] += e
		}
	}
}

func bitsFor(spans []Span, slots int, match map[int]bool) [][]float64 {
	out := make([][]float64, len(spans))
	for i, sp := range spans {
		out[i] = make([]float64, slots)
		for s := 0; s < sp.Count; s++ {
			if match[sp.Start+s] {
				out[i][s] = 1
			}
		}
	}
	return out
}

// TestTwoCopiesSeparateEveryPair: for every layout shape, no two slots of
// the gallery share their cell in both copies.
func TestTwoCopiesSeparateEveryPair(t *testing.T) {
	for _, c := range []struct{ slots, groups, bound int }{{2048, 1, 4}, {2048, 3, 4}, {2048, 8, 1}, {4096, 5, 32}, {1024, 16, 2}} {
		l, err := NewLayout(c.slots, c.groups, 7, c.bound)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[[2]int]bool{}
		for g := 0; g < c.groups; g++ {
			for s := 0; s < c.slots; s++ {
				k := [2]int{l.Cell(0, g, s), l.Cell(1, g, s)}
				if seen[k] {
					t.Fatalf("%+v: slot %d of group %d shares both cells with another", l, s, g)
				}
				seen[k] = true
			}
		}
		// The places of (copy, column, cell) are distinct.
		places := map[[2]int]bool{}
		for cp := 0; cp < 2; cp++ {
			for col := 0; col < l.Columns(); col++ {
				for j := 0; j < l.Cells; j++ {
					ct, slot := l.Where(cp, col, j)
					if places[[2]int{ct, slot}] || ct >= l.Ciphertexts() || slot < 0 || slot >= l.Slots {
						t.Fatalf("%+v: place (%d, %d) reused or out of range", l, ct, slot)
					}
					places[[2]int{ct, slot}] = true
				}
			}
		}
	}
}

// TestDecodeRandomMatchesExactly: up to the bound matches at random
// positions, with the comparator's worst error on every bit, decode to the
// brute-force answer, sorted by payload.
func TestDecodeRandomMatchesExactly(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	spans := spansOf(2048, 2048, 2048, 1000)
	l, err := NewLayout(2048, len(spans), 7, 32)
	if err != nil {
		t.Fatal(err)
	}
	pay := gallery(rng, spans, 7)
	for trial := 0; trial < 200; trial++ {
		k := rng.IntN(33)
		match := map[int]bool{}
		for len(match) < k {
			match[rng.IntN(7144)] = true
		}
		bits := bitsFor(spans, 2048, match)
		want := expected(spans, bits, pay, 7)
		noisy(rng, bits)
		ans, err := Decode(l, spans, Model(l, spans, bits, pay))
		if err != nil {
			t.Fatal(err)
		}
		if ans.Count != k || !ans.Complete || len(ans.Records) != len(want) {
			t.Fatalf("trial %d: %d matches: count %d, complete %v, %d records", trial, k, ans.Count, ans.Complete, len(ans.Records))
		}
		for i := range want {
			if ans.Records[i].Position != want[i].Position || !reflect.DeepEqual(ans.Records[i].Payload, want[i].Payload) {
				t.Fatalf("trial %d: record %d is %+v, want %+v", trial, i, ans.Records[i], want[i])
			}
		}
	}
}

// TestDecodeCrowdedNeighbours: runs of consecutive matches (a person
// enrolled many times in a row) and the same slot in every group decode.
func TestDecodeCrowdedNeighbours(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	spans := spansOf(2048, 2048, 2048, 2048)
	l, _ := NewLayout(2048, 4, 3, 32)
	pay := gallery(rng, spans, 3)
	match := map[int]bool{}
	for p := 100; p < 124; p++ {
		match[p] = true
	}
	for g := 0; g < 4; g++ {
		match[g*2048+7] = true
	}
	bits := bitsFor(spans, 2048, match)
	ans, _ := Decode(l, spans, Model(l, spans, bits, pay))
	if !ans.Complete || ans.Count != 28 || !reflect.DeepEqual(ans.Records, expected(spans, bits, pay, 3)) {
		t.Fatalf("crowded matches: complete %v count %d records %d", ans.Complete, ans.Count, len(ans.Records))
	}
}

// TestDecodeReportsWhatItCannot: more matches than the bound, and four
// matches closing a cycle between the copies, give the exact count and an
// incomplete answer, never a wrong record.
func TestDecodeReportsWhatItCannot(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	spans := spansOf(2048)
	l, _ := NewLayout(2048, 1, 2, 4) // m = 64, w = 32
	pay := gallery(rng, spans, 2)
	// A cycle: slots a, a+m share copy-1 cells with b, b+m... pick two
	// slots in one block and their partners m apart, both in one block.
	w, m := l.Block(), l.Cells
	cycle := []int{0, 1, m, m + 1} // cells (0,0) (1,0) (0,2) (1,2) with w=32, m=64
	if l.Cell(1, 0, 0) != l.Cell(1, 0, 1) || l.Cell(0, 0, 0) != l.Cell(0, 0, m) || w != 32 {
		t.Fatalf("test layout changed: m %d w %d", m, w)
	}
	match := map[int]bool{}
	for _, p := range cycle {
		match[p] = true
	}
	match[500] = true // decodable on its own
	bits := bitsFor(spans, 2048, match)
	ans, _ := Decode(l, spans, Model(l, spans, bits, pay))
	if ans.Complete || ans.Count != 5 || ans.Unresolved != 4 || len(ans.Records) != 1 || ans.Records[0].Position != 500 {
		t.Fatalf("cycle: %+v", ans)
	}
	// More matches than the bound: exact count, marked incomplete.
	match = map[int]bool{}
	for len(match) < 9 {
		match[rng.IntN(2048)] = true
	}
	bits = bitsFor(spans, 2048, match)
	ans, _ = Decode(l, spans, Model(l, spans, bits, pay))
	if ans.Complete || ans.Count != 9 {
		t.Fatalf("over the bound: %+v", ans)
	}
	for _, r := range ans.Records {
		if !match[r.Position] {
			t.Fatalf("over the bound: decoded a non-match %d", r.Position)
		}
	}
}

// TestDecodeFractionalBits: a score inside the guard band (bit 0.7 or
// 0.3) is never read as a record: its cells are left, reported as
// uncertain, the answer incomplete; the clean match is read.
func TestDecodeFractionalBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	spans := spansOf(2048)
	l, _ := NewLayout(2048, 1, 7, 8)
	pay := gallery(rng, spans, 7)
	for _, frac := range []float64{0.7, 0.3, 0.5} {
		bits := bitsFor(spans, 2048, map[int]bool{10: true})
		bits[0][900] = frac
		ans, _ := Decode(l, spans, Model(l, spans, bits, pay))
		if len(ans.Records) != 1 || ans.Records[0].Position != 10 || ans.Uncertain != 2 || ans.Complete {
			t.Fatalf("bit %v: %+v", frac, ans)
		}
	}
}

func TestLayoutRefusesWhatItCannotHold(t *testing.T) {
	for _, c := range []struct{ slots, groups, width, bound int }{{2048, 1, 7, 0}, {2048, 1, 7, MaxBound + 1}, {2048, 1, 0, 4}, {2000, 1, 7, 4}, {1 << 14, 1 << 11, 7, 32}} {
		if _, err := NewLayout(c.slots, c.groups, c.width, c.bound); err == nil {
			t.Errorf("NewLayout%+v accepted", c)
		}
	}
	l, err := NewLayout(1<<14, 4, 7, 32) // the workload's 50,000 records at the default preset
	if err != nil || l.Cells != 256 || l.Ciphertexts() != 2 {
		t.Fatalf("workload layout %+v, %v", l, err)
	}
}

// FuzzDecode: any decrypted values (a forged or corrupt result that passed
// the frame checks) decode without a panic to records inside the gallery,
// each read from a cell that names it.
func FuzzDecode(f *testing.F) {
	f.Add([]byte{0}, uint16(3))
	f.Add([]byte{1, 155, 3, 0, 128, 0, 127, 255}, uint16(17))
	spans := spansOf(2048, 500)
	l, _ := NewLayout(2048, 2, 2, 4)
	f.Fuzz(func(t *testing.T, data []byte, at uint16) {
		values := make([][]float64, l.Ciphertexts())
		for i := range values {
			values[i] = make([]float64, l.Slots)
		}
		// Write the bytes as cell values of copy 0, column by column, from cell at.
		for k, b := range data {
			c, j := k%l.Columns(), (int(at)+k/l.Columns())%l.Cells
			ct, slot := l.Where(0, c, j)
			values[ct][slot] = float64(b)
		}
		ans, err := Decode(l, spans, values)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range ans.Records {
			if r.Position < 0 || r.Position >= 2548 || len(r.Payload) != 2 {
				t.Fatalf("decoded %+v", r)
			}
		}
	})
}
