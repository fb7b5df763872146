// Package payload fetches, for the key holder only, the int16 payloads
// enrolled beside the gallery vectors whose score passes the threshold
// (the HomomorphicEncryption.org "fetch by similarity" workload), in a
// result whose size depends on a public bound on the number of matches and
// not on the number of records.
//
// Each record carries columns: a count (1), three bytes of its gallery
// position and two bytes (high, low) of each payload value shifted to
// [0, 65535]. Bytes keep every column below 256, so that the comparator's
// error on a non-match (at most 2^-21 per record) summed over a cell stays
// far below one half.
//
// The server multiplies the comparator's match bits into every column
// (the payload columns are ciphertexts enrolled at the payload level: one
// ciphertext product; the count and position columns are public integers:
// a plaintext product at scale 1, no level), then sums the records of every
// group into m cells twice, with two maps that separate any two records of
// a gallery of at most m^2 slots (Layout):
//
//   - copy 1: cell (slot mod m), by rotations of K/2, K/4, ..., m and
//     additions (K slots per ciphertext);
//   - copy 2: cell ((slot div w) - group) mod m, w = K/m, by rotating group
//     g by g*w before adding the groups, then rotations of 1, 2, ..., w/2.
//
// The cells of every column are then packed by plaintext masks at scale 1
// and rotations by powers of two into a few ciphertexts (two when the
// columns fit a block of w slots). Only rotations by powers of two are
// used: the keys every key set holds for the membership inner sum.
//
// The key holder decodes by peeling (Decode): a cell whose count is one and
// whose position bytes name a record of that very cell holds that record
// alone; it is read, removed from its cell of the other copy, and so on
// until nothing changes. Every cell must then be empty. Any two matches
// are separated by at least one copy, so a set of matches decodes unless
// four or more of them close a cycle between the copies; then, or when
// more records match than the bound, or when a score lies inside the
// comparator's guard band, the answer says so and is marked incomplete:
// never silently truncated.
package payload

import "fmt"

// Column layout of a record.
const (
	// PositionBytes is the number of base-256 digits of a gallery position.
	PositionBytes = 3
	// MaxRecords is the largest gallery whose positions the columns hold.
	MaxRecords = 1 << (8 * PositionBytes)
	// headerColumns: the count and the position bytes.
	headerColumns = 1 + PositionBytes
	// MaxBound is the largest bound on the number of matches a search takes.
	MaxBound = 4096
	// MaxWidth is the largest number of int16 values per record.
	MaxWidth = 64
	// DefaultBound is the workload's bound.
	DefaultBound = 32
	// cellsPerBound is how many cells of each copy a match may use: with
	// at most bound matches in 8*bound cells, collisions stay rare.
	cellsPerBound = 8
	// maxCellRecords bounds the records summed in one cell, so that the
	// sum of their bytes (at most 255 each) stays below 2^21, a factor 4
	// below the result's headroom (ResultScale).
	maxCellRecords = 1 << 13
)

// Layout is the public shape of a payload result: it depends only on the
// slots per ciphertext, the number of groups of the index, the payload
// width and the bound, never on the data.
type Layout struct {
	Slots  int `json:"slots"`  // K: records per group
	Groups int `json:"groups"` // G: groups of the whole index
	Width  int `json:"width"`  // W: int16 values per record
	Bound  int `json:"bound"`  // public bound on the number of matches
	Cells  int `json:"cells"`  // m: cells per copy
}

// NewLayout chooses the cells: the smallest power of two m >= 8*bound
// with m^2 >= G*K (so that the two copies separate any two records),
// refusing shapes whose cells would hold too many records.
func NewLayout(slots, groups, width, bound int) (Layout, error) {
	l := Layout{Slots: slots, Groups: groups, Width: width, Bound: bound}
	if slots < 2 || slots&(slots-1) != 0 {
		return l, fmt.Errorf("payload layout: %d slots is not a power of two", slots)
	}
	if width < 1 || width > MaxWidth || groups < 1 {
		return l, fmt.Errorf("payload layout: width %d (at most %d) and groups %d must be positive", width, MaxWidth, groups)
	}
	if bound < 1 || bound > MaxBound {
		return l, fmt.Errorf("the bound on the number of matches must lie in [1, %d], got %d", MaxBound, bound)
	}
	if groups > MaxRecords/slots {
		return l, fmt.Errorf("payload fetch holds at most %d gallery slots (%d groups of %d)", MaxRecords, groups, slots)
	}
	m := 1
	for m < cellsPerBound*bound || m*m < groups*slots {
		m <<= 1
	}
	if m > slots {
		m = slots
	}
	if m*m < groups*slots {
		return l, fmt.Errorf("payload layout: %d groups of %d slots need more than %d cells", groups, slots, slots)
	}
	l.Cells = m
	if n := l.cellRecords(); n > maxCellRecords {
		return l, fmt.Errorf("payload layout: %d records per cell, more than %d", n, maxCellRecords)
	}
	return l, nil
}

// Block is w = K/m, the width of a copy-2 block.
func (l Layout) Block() int { return l.Slots / l.Cells }

// Columns is the number of columns of a record: count, position bytes and
// two bytes per payload value.
func (l Layout) Columns() int { return headerColumns + 2*l.Width }

// PerCopy is the number of result ciphertexts of one copy: w columns fit
// in one.
func (l Layout) PerCopy() int { return (l.Columns() + l.Block() - 1) / l.Block() }

// Ciphertexts is the number of ciphertexts of a result.
func (l Layout) Ciphertexts() int { return 2 * l.PerCopy() }

// cellRecords is the most records one cell sums: w = K/m per group in
// either copy.
func (l Layout) cellRecords() int { return l.Groups * l.Block() }

// Cell returns the cell of slot s of group g in copy (side) 0 or 1.
func (l Layout) Cell(side, g, s int) int {
	if side == 0 {
		return s % l.Cells
	}
	return ((s/l.Block()-g)%l.Cells + l.Cells) % l.Cells
}

// Where gives the ciphertext (counted over the whole result, copy 0 first)
// and slot holding column c of cell j of a copy.
func (l Layout) Where(side, c, j int) (ct, slot int) {
	w := l.Block()
	ct, k := c/w, c%w
	if side == 0 {
		return ct, k*l.Cells + j
	}
	return l.PerCopy() + ct, ((j*w-k)%l.Slots + l.Slots) % l.Slots
}

// powersOfTwo returns the powers of two whose sum is k (k >= 0), the
// rotations that make up a rotation by k with the inner sum's keys.
func powersOfTwo(k int) []int {
	var out []int
	for k > 0 {
		b := k & -k
		out = append(out, b)
		k &^= b
	}
	return out
}

// Values returns the columns of one record: its count, the bytes of its
// position and the high and low bytes of each payload value + 32768.
func Values(position int, payload []int16) []float64 {
	out := make([]float64, 0, headerColumns+2*len(payload))
	out = append(out, 1)
	for b := 0; b < PositionBytes; b++ {
		out = append(out, float64(position>>(8*b)&0xff))
	}
	for _, v := range payload {
		u := int(v) + 32768
		out = append(out, float64(u>>8), float64(u&0xff))
	}
	return out
}

// PayloadColumns returns the 2*width payload columns of a group, each of
// slots values: slot first+i holds record i of payloads (row-major, width
// values per record); other slots hold 0.
func PayloadColumns(payloads []int16, width, first, slots int) [][]float64 {
	cols := make([][]float64, 2*width)
	for c := range cols {
		cols[c] = make([]float64, slots)
	}
	for i := 0; i < len(payloads)/width; i++ {
		for j, v := range payloads[i*width : (i+1)*width] {
			u := int(v) + 32768
			cols[2*j][first+i] = float64(u >> 8)
			cols[2*j+1][first+i] = float64(u & 0xff)
		}
	}
	return cols
}

// MaxCellValue is the largest value an honest cell can hold: every record
// of the cell matching with bytes of 255.
func (l Layout) MaxCellValue() float64 { return float64(255 * l.cellRecords()) }
