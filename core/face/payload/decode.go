package payload

import (
	"fmt"
	"math"
	"sort"
)

// Record is one decoded match.
type Record struct {
	Position int     `json:"position"`
	Payload  []int16 `json:"payload"`
}

// Answer is a decoded payload result.
type Answer struct {
	// Count is the exact number of matches (the rounded sum of the
	// count cells), and RawCount that sum as decrypted.
	Count    int     `json:"count"`
	RawCount float64 `json:"raw_count"`
	// Records are the decoded matches (weight >= 1/2), sorted by payload
	// (lexicographically) then position.
	Records []Record `json:"records"`
	// Complete is true when every match was decoded and no more records
	// matched than the bound.
	Complete bool `json:"complete"`
	// Unresolved is the number of matches that could not be decoded.
	Unresolved int `json:"unresolved"`
	// Uncertain counts the cells left with a fractional count: a score
	// inside the comparator's guard band (a fractional match bit).
	Uncertain int `json:"uncertain"`
}

// Decode tolerances. A cell of n records, each contributing at most
// 2^-21 per unit of its column when it does not match (the value band's
// tolerance), is off by at most n*255*2^-21 in a byte column and n*2^-21
// in the count (with a few hundred records, as at the workload's sizes,
// 2^-5 and 2^-13); a matching record's bytes carry the encryption and
// masking errors of PayloadScale. Measured at N = 2^15
// (TestCompactNoiseAtTheSecureRing): at most 0.016 in any cell.
//
// A record is read only from a cell whose count is 1 within
// countTolerance: a fractional match bit (a score inside the guard band)
// cannot be divided out of its bytes reliably (a count error of 0.02 on a
// bit of 1/2 moves a byte of 255 by 10), so such a cell is left, reported
// as uncertain, and the answer incomplete.
const (
	countTolerance = 0.1
	byteTolerance  = 0.25
)

// Span is a group's place in the gallery.
type Span struct {
	Index, Start, Count int
}

// Decode reads the decrypted result (values[i]: the slots of ciphertext i)
// laid out by l for the groups spans (every group of the index).
func Decode(l Layout, spans []Span, values [][]float64) (*Answer, error) {
	if len(values) != l.Ciphertexts() {
		return nil, fmt.Errorf("a payload result of %d ciphertexts, the layout has %d", len(values), l.Ciphertexts())
	}
	for i, v := range values {
		if len(v) < l.Slots {
			return nil, fmt.Errorf("ciphertext %d decrypts to %d slots, the layout has %d", i, len(v), l.Slots)
		}
	}
	cols := l.Columns()
	// cells[copy][j][c]
	var cells [2][][]float64
	for cp := range cells {
		cells[cp] = make([][]float64, l.Cells)
		for j := range cells[cp] {
			cells[cp][j] = make([]float64, cols)
			for c := 0; c < cols; c++ {
				ct, slot := l.Where(cp, c, j)
				cells[cp][j][c] = values[ct][slot]
			}
		}
	}
	// The count: copy 1's count cells, each rounded on its own. Rounding
	// their sum instead would let the cells' errors add up with the number
	// of matches (measured at N = 2^15, kappa 13: 0.083 for 32 matches,
	// docs/PAYLOAD.md), past one half at large bounds; a cell farther than
	// countTolerance from an integer is reported as uncertain below.
	ans := &Answer{Records: []Record{}}
	count := 0.0
	for j := range cells[0] {
		c := cells[0][j][0]
		ans.RawCount += c
		count += math.Round(c)
	}
	ans.Count = max(0, int(count))

	byPosition := func(pos int) (Span, bool) {
		i := sort.Search(len(spans), func(i int) bool { return spans[i].Start+spans[i].Count > pos })
		if i < len(spans) && spans[i].Start <= pos {
			return spans[i], true
		}
		return Span{}, false
	}
	found := map[int]bool{}
	for changed := true; changed; {
		changed = false
		for cp := range cells {
			for j, cell := range cells[cp] {
				r, ok := l.pure(cp, j, cell, byPosition)
				if !ok || found[r.Position] {
					continue
				}
				found[r.Position] = true
				changed = true
				sp, _ := byPosition(r.Position)
				other := cells[1-cp][l.Cell(1-cp, sp.Index, r.Position-sp.Start)]
				vals := Values(r.Position, r.Payload)
				for c := range cell {
					other[c] -= vals[c]
					cell[c] = 0
				}
				ans.Records = append(ans.Records, r)
			}
		}
	}
	// Every cell must now be empty (up to the tolerances).
	leftover := 0
	for cp := range cells {
		for _, cell := range cells[cp] {
			if !empty(cell) {
				leftover++
				if f := math.Abs(cell[0] - math.Round(cell[0])); f > countTolerance {
					ans.Uncertain++
				}
			}
		}
	}
	sort.Slice(ans.Records, func(i, j int) bool {
		a, b := ans.Records[i].Payload, ans.Records[j].Payload
		for k := range a {
			if a[k] != b[k] {
				return a[k] < b[k]
			}
		}
		return ans.Records[i].Position < ans.Records[j].Position
	})
	ans.Unresolved = max(0, ans.Count-len(ans.Records))
	if leftover > 0 && ans.Unresolved == 0 {
		ans.Unresolved = 1 // something matched that no record accounts for
	}
	ans.Complete = leftover == 0 && ans.Unresolved == 0 && ans.Count <= l.Bound
	return ans, nil
}

// empty reports a cell with no record in it: a count near 0 and bytes no
// larger than what the count allows.
func empty(cell []float64) bool {
	w := math.Abs(cell[0])
	if w > countTolerance {
		return false
	}
	for _, v := range cell[1:] {
		if math.Abs(v) > byteTolerance+255*w {
			return false
		}
	}
	return true
}

// pure reads the record of a cell that holds exactly one: a count of 1,
// every byte an integer within range, a position inside the gallery whose
// cell in this copy is this one.
func (l Layout) pure(cp, j int, cell []float64, byPosition func(int) (Span, bool)) (Record, bool) {
	if math.Abs(cell[0]-1) > countTolerance {
		return Record{}, false
	}
	bytes := make([]int, len(cell)-1)
	for c, v := range cell[1:] {
		b := math.Round(v)
		if b < 0 || b > 255 || math.Abs(v-b) > byteTolerance {
			return Record{}, false
		}
		bytes[c] = int(b)
	}
	pos := 0
	for b := PositionBytes - 1; b >= 0; b-- {
		pos = pos<<8 | bytes[b]
	}
	sp, ok := byPosition(pos)
	if !ok || l.Cell(cp, sp.Index, pos-sp.Start) != j {
		return Record{}, false
	}
	payload := make([]int16, l.Width)
	for k := range payload {
		payload[k] = int16((bytes[PositionBytes+2*k]<<8 | bytes[PositionBytes+2*k+1]) - 32768)
	}
	return Record{Position: pos, Payload: payload}, true
}
