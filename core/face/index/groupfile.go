// The group file format: records of ciphertexts (whole, or seeded c0
// halves), written atomically, read whole or streamed in chunks.

package index

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"

	"encmatch/core/base/codec"
	"encmatch/core/base/envelope"
	"encmatch/core/base/errs"
	"encmatch/core/base/packing"
	"encmatch/core/base/parallel"
	"encmatch/core/base/params"
	"encmatch/core/face/payload"
	"encmatch/core/face/seeded"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// writeGroup writes group g's diagonals; with a seed, the seed and only
// the c0 half of each ciphertext.
func writeGroup(path string, m *Manifest, g Group, p ckks.Parameters, cts []*rlwe.Ciphertext, seed *seeded.Seed) (int64, error) {
	err := envelope.WriteFileStream(path, m.groupHeader(g), groupPayload(p, len(cts)-2*m.PayloadWidth, 2*m.PayloadWidth, seed != nil), 0o644, func(w io.Writer) error {
		if seed != nil {
			if _, err := w.Write(record(seed[:])); err != nil {
				return err
			}
		}
		for _, ct := range cts {
			if seed != nil {
				ct = &rlwe.Ciphertext{Element: rlwe.Element[ring.Poly]{Value: ct.Value[:1], MetaData: ct.MetaData}}
			}
			b, err := codec.PackCiphertext(ct, p)
			if err != nil {
				return err
			}
			if _, err := w.Write(record(b)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("writing %s: %w", path, err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// A group payload is a sequence of records: u64 length | bytes | u32
// CRC-32C of the bytes. A seeded group starts with a record holding the
// seed; then each diagonal is one record holding the ciphertext with
// bit-packed coefficients (codec.PackCiphertext), only its c0 half when
// seeded. The file's SHA-256 (envelope) covers the whole group; the
// per-record CRC lets a streamed read check every ciphertext in one pass.
const recordOverhead = 8 + 4

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func record(b []byte) []byte {
	rec := envelope.AppendChunk(make([]byte, 0, len(b)+recordOverhead), b)
	return binary.LittleEndian.AppendUint32(rec, crc32.Checksum(b, castagnoli))
}

// storedDegree is the degree of the stored part of a diagonal.
func storedDegree(seededGroup bool) int {
	if seededGroup {
		return 0
	}
	return 1
}

// groupPayload is the payload size of a group of l diagonals at the top
// level and cols payload columns at PayloadLevel.
func groupPayload(p ckks.Parameters, l, cols int, seededGroup bool) int64 {
	deg := storedDegree(seededGroup)
	n := int64(l)*int64(recordOverhead+codec.PackedSize(p, deg, p.MaxLevel())) +
		int64(cols)*int64(recordOverhead+codec.PackedSize(p, deg, PayloadLevel))
	if seededGroup {
		n += recordOverhead + seeded.SeedSize
	}
	return n
}

// PayloadLevel is the level of the payload columns: the level of the
// comparator's output on a chain with the payload level (params.NewWith).
const PayloadLevel = 1

// groupPlain is what a group's records encode: its diagonals (real, or
// complex when the parameters fold) and its payload columns (none without
// payloads).
type groupPlain struct {
	diags   [][]float64
	folded  [][]complex128
	columns [][]float64
}

// newGroupPlain packs normalised vectors (of length set.Padded()) into a
// group's diagonals, scaled by scale, folded when set.Fold.
func newGroupPlain(set *params.Set, vecs [][]float64, scale float64) (groupPlain, error) {
	if !set.Fold {
		d, err := packing.Diagonals(vecs, set.L(), set.Slots(), scale)
		return groupPlain{diags: d}, err
	}
	folded := make([][]complex128, len(vecs))
	for i, v := range vecs {
		folded[i] = packing.Fold(v)
	}
	d, err := packing.Diagonals(folded, set.L(), set.Slots(), scale)
	return groupPlain{folded: d}, err
}

// diagonal is diagonal i rotated by r slots, as Lattigo's encoder takes it.
func (g groupPlain) diagonal(i, r int) any {
	if g.folded != nil {
		return packing.Rotate(g.folded[i], r)
	}
	return packing.Rotate(g.diags[i], r)
}

// BytesPerGroup is the size of a group file's payload at the parameters of
// set for payloadWidth int16 per record: stored whole (public-key
// enrollment) or seeded (secret-key).
func BytesPerGroup(set *params.Set, payloadWidth int, seededGroup bool) int64 {
	return groupPayload(set.CKKS, set.L(), 2*payloadWidth, seededGroup)
}

// LoadGroup reads group g after verifying the whole file's SHA-256.
func LoadGroup(dir string, m *Manifest, set *params.Set, g Group) ([]*rlwe.Ciphertext, error) {
	path := filepath.Join(dir, g.File)
	var cts []*rlwe.Ciphertext
	err := envelope.ReadFileStream(path, m.groupHeader(g), func(r io.Reader, n int64) error {
		return readRecords(r, n, set, g, 2*m.PayloadWidth, set.L(), false, func(first int, chunk []*rlwe.Ciphertext, _ *Masks) error {
			cts = append(cts, chunk...)
			return nil
		})
	})
	if err != nil {
		return nil, groupError(path, err)
	}
	return cts, nil
}

// StreamGroup reads group g in one pass, checking each ciphertext's CRC-32C
// and layout, and hands the diagonals to emit in chunks of chunk
// ciphertexts (first is the index of the chunk's first diagonal). Used when
// the index does not fit in memory.
func StreamGroup(dir string, m *Manifest, set *params.Set, g Group, chunk int, emit func(first int, cts []*rlwe.Ciphertext) error) error {
	return streamGroup(dir, m, set, g, chunk, false, func(first int, cts []*rlwe.Ciphertext, _ *Masks) error { return emit(first, cts) })
}

// StreamGroupStoredHalves is StreamGroup for a reader that regenerates a
// seeded group's uniform halves itself: the diagonals of a seeded group
// come with their stored half only (degree 0) and masks, whose Complete
// adds each one's uniform half where the reader is about to use it, so
// that the chunks waiting between the reader and the disk hold half the
// bytes and the masks are drawn by the reader's workers. masks is nil for
// a group stored whole; the payload columns always come complete.
func StreamGroupStoredHalves(dir string, m *Manifest, set *params.Set, g Group, chunk int, emit func(first int, cts []*rlwe.Ciphertext, masks *Masks) error) error {
	return streamGroup(dir, m, set, g, chunk, true, emit)
}

func streamGroup(dir string, m *Manifest, set *params.Set, g Group, chunk int, deferMasks bool, emit func(int, []*rlwe.Ciphertext, *Masks) error) error {
	path := filepath.Join(dir, g.File)
	ps, err := envelope.OpenPayload(path, m.groupHeader(g))
	if err != nil {
		return groupError(path, err)
	}
	defer ps.Close()
	if err := readRecords(ps, ps.Len, set, g, 2*m.PayloadWidth, chunk, deferMasks, emit); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// Masks regenerates the uniform halves of a seeded group's records: the
// diagonals' that StreamGroupStoredHalves left out, and every record's
// when the group is decoded whole. It is safe for concurrent use.
type Masks struct {
	p    ckks.Parameters
	seed seeded.Seed
}

// Complete appends to ct, diagonal i of the group as
// StreamGroupStoredHalves gave it (its stored half alone), its uniform
// half; a ciphertext that already has both halves is refused.
func (k *Masks) Complete(i int, ct *rlwe.Ciphertext) error {
	if level := k.p.MaxLevel(); ct.Degree() != 0 || ct.Level() != level {
		return fmt.Errorf("internal error: diagonal %d has degree %d and level %d, not a stored half at level %d", i, ct.Degree(), ct.Level(), level)
	}
	k.add(i, ct)
	return nil
}

// add appends to ct, record i with its stored half alone, its uniform half
// at ct's level: seeded.Mask under the group's seed.
func (k *Masks) add(i int, ct *rlwe.Ciphertext) {
	rq := k.p.RingQ().AtLevel(ct.Level())
	c1 := rq.NewPoly()
	seeded.Mask(rq, k.seed, uint64(i), c1)
	ct.Value = append(ct.Value, c1)
}

func groupError(path string, err error) error {
	if os.IsNotExist(err) {
		dir, name := filepath.Split(path)
		if m, lerr := Load(dir); lerr == nil {
			for _, g := range m.Groups {
				if g.File != name && strings.HasPrefix(name, strings.SplitN(g.File, ".", 2)[0]+".") {
					return fmt.Errorf("%w: group file %s was replaced by %s since the index was loaded (an enrollment filled the group): reopen the index", errs.ErrMismatch, path, g.File)
				}
			}
		}
		return fmt.Errorf("%w: group file %s named by the manifest is missing", errs.ErrCorrupt, path)
	}
	return err
}

// readRecord reads one record of exactly size bytes into buf and checks
// its CRC.
func readRecord(r io.Reader, buf []byte, size int, what string) ([]byte, error) {
	buf = buf[:recordOverhead+size]
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, fmt.Errorf("%w: %v", errs.ErrCorrupt, err)
	}
	b, rest, err := envelope.NextChunk(buf)
	if err != nil || len(b) != size || len(rest) != 4 {
		return nil, fmt.Errorf("%w: %s has the wrong size", errs.ErrCorrupt, what)
	}
	if crc32.Checksum(b, castagnoli) != binary.LittleEndian.Uint32(rest) {
		return nil, fmt.Errorf("%w: %s fails its CRC-32C", errs.ErrCorrupt, what)
	}
	return b, nil
}

// readRecords decodes the l diagonal records of a group payload, in chunks
// of chunk diagonals, then its cols payload columns, in one chunk of their
// own (first = l), regenerating the uniform halves of a seeded group (of
// its payload columns only when deferMasks: emit then gets the Masks that
// complete the diagonals). The records are read in order and decoded
// (unpacked, masks regenerated) in parallel, a window of decodeWindow
// records per worker at a time.
func readRecords(r io.Reader, n int64, set *params.Set, g Group, cols, chunk int, deferMasks bool, emit func(int, []*rlwe.Ciphertext, *Masks) error) error {
	p, l := set.CKKS, set.L()
	if want := groupPayload(p, l, cols, g.Seeded); n != want {
		return fmt.Errorf("%w: %d payload bytes, expected %d for %d diagonals and %d payload columns", errs.ErrCorrupt, n, want, l, cols)
	}
	var seed seeded.Seed
	if g.Seeded {
		b, err := readRecord(r, make([]byte, recordOverhead+seeded.SeedSize), seeded.SeedSize, "the seed")
		if err != nil {
			return err
		}
		copy(seed[:], b)
	}
	// The masks of a seeded group are drawn at decoding, except the
	// diagonals' when deferMasks: emit then gets masks to complete them.
	var masks *Masks
	if g.Seeded {
		masks = &Masks{p: p, seed: seed}
	}
	drawnAt := func(i int) *Masks {
		if deferMasks && i < l {
			return nil
		}
		return masks
	}
	// Records [lo, hi) of one emitted chunk: diagonals by chunk, the
	// diagonals' last chunk ending at l, the columns in one chunk.
	window := decodeWindow * parallel.Workers()
	bufs := make([][]byte, window)
	for i := range bufs {
		bufs[i] = make([]byte, recordOverhead+codec.PackedSize(p, storedDegree(g.Seeded), p.MaxLevel()))
	}
	for lo := 0; lo < l+cols; {
		hi := min(lo+chunk, l)
		if lo >= l {
			hi = l + cols
		}
		batch := make([]*rlwe.Ciphertext, 0, hi-lo)
		for w := lo; w < hi; w += window {
			raw := make([][]byte, min(window, hi-w))
			names := make([]string, len(raw))
			for k := range raw {
				var err error
				names[k] = recordName(g, l, w+k)
				if raw[k], err = readRecord(r, bufs[k], recordSize(p, g, l, w+k), names[k]); err != nil {
					return err
				}
			}
			cts := make([]*rlwe.Ciphertext, len(raw))
			if err := parallel.For(len(raw), func(k int) error {
				var err error
				cts[k], err = decodeRecord(raw[k], p, g, l, w+k, drawnAt(w+k), names[k])
				return err
			}); err != nil {
				return err
			}
			batch = append(batch, cts...)
		}
		var left *Masks // what this chunk's records still need
		if drawnAt(lo) == nil {
			left = masks
		}
		if err := emit(lo, batch, left); err != nil {
			return err
		}
		lo = hi
	}
	return nil
}

// decodeWindow is the records each worker decodes per window of
// readRecords (a diagonal's record is about 2 MB at the default preset).
const decodeWindow = 4

// recordLevel is the level of record i of a group of l diagonals: the
// diagonals' at the top, the payload columns' at PayloadLevel.
func recordLevel(p ckks.Parameters, l, i int) int {
	if i >= l {
		return PayloadLevel
	}
	return p.MaxLevel()
}

// recordSize is the stored size of record i.
func recordSize(p ckks.Parameters, g Group, l, i int) int {
	return codec.PackedSize(p, storedDegree(g.Seeded), recordLevel(p, l, i))
}

// recordName names record i of group g in errors.
func recordName(g Group, l, i int) string {
	if i >= l {
		return fmt.Sprintf("%s payload column %d", g.File, i-l)
	}
	return fmt.Sprintf("%s diagonal %d", g.File, i)
}

// decodeRecord unpacks record i (named what in errors), regenerating its
// uniform half with masks when not nil, and checks a payload column's
// scale.
func decodeRecord(b []byte, p ckks.Parameters, g Group, l, i int, masks *Masks, what string) (*rlwe.Ciphertext, error) {
	ct, err := codec.UnpackCiphertext(b, p, storedDegree(g.Seeded), recordLevel(p, l, i), what)
	if err != nil {
		return nil, err
	}
	if masks != nil {
		masks.add(i, ct)
	}
	if i >= l && !ct.Scale.Equal(rlwe.NewScale(payload.PayloadScale)) {
		return nil, fmt.Errorf("%w: %s is not at the payload columns' scale", errs.ErrCorrupt, what)
	}
	return ct, nil
}
