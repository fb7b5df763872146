// Enrollment: vectors packed, encrypted and appended, filling the last
// group first; files the manifest does not name are removed.

package index

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"encmatch/core/base/envelope"
	"encmatch/core/base/errs"
	"encmatch/core/base/packing"
	"encmatch/core/base/parallel"
	"encmatch/core/base/params"
	"encmatch/core/face/keys"
	"encmatch/core/face/payload"
	"encmatch/core/face/seeded"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// EnrollSummary reports an enrollment.
type EnrollSummary struct {
	Added int `json:"added"`
	Total int `json:"total"`
	// GroupsWritten counts the group files written: new groups and filled ones.
	GroupsWritten int `json:"groups_written"`
	// GroupsFilled counts the existing groups filled (rewritten whole).
	GroupsFilled int `json:"groups_filled"`
	// GroupsNew counts the groups added.
	GroupsNew int `json:"groups_new"`
	// Bytes is the size of the files written (a filled group counts whole).
	Bytes int64 `json:"bytes"`
	// Growth is what the index grew on disk: Bytes less the files replaced.
	Growth  int64   `json:"growth"`
	Seconds float64 `json:"seconds"`
	// GroupSlots is the capacity of a group (the parameters' slots).
	GroupSlots int `json:"group_slots"`
	// Writes lists the groups written, in order.
	Writes []GroupWrite `json:"group_writes"`
}

// GroupWrite is one group file an enrollment wrote.
type GroupWrite struct {
	Group  int   `json:"group"`  // position in the manifest's group list
	Filled bool  `json:"filled"` // an existing group filled, not a new one
	Added  int   `json:"added"`  // entries this enrollment put there
	Count  int   `json:"count"`  // entries the group holds now
	Bytes  int64 `json:"bytes"`  // size of its file
	Seeded bool  `json:"seeded"`
}

// EnrollOptions tunes an enrollment.
type EnrollOptions struct {
	// NewGroups puts every vector in new groups even when the last group
	// has room: for an enroller that does not hold the group files (the
	// service's staging directory holds only the manifest).
	NewGroups bool
	// Payloads are the n x PayloadWidth int16 values of the vectors,
	// row-major: required by an index with payloads, refused by one without.
	Payloads []int16
}

// Enroll validates, normalises, packs and encrypts n vectors of dimension
// dim (row-major in data) under the public key and appends them to the
// index: first into the last group while it has room (a seeded group it
// fills is then stored whole: this enroller cannot make seeded
// ciphertexts), then as new groups. Nothing is written unless every vector
// is valid. EnrollOptions{} fills the last group, without payloads.
func Enroll(dir string, pub *keys.Public, data []float32, n, dim int, opt EnrollOptions) (*EnrollSummary, error) {
	enc := rlwe.NewEncryptor(pub.Params.CKKS, pub.Key)
	return enroll(dir, pub.Meta, pub.Params, data, n, dim, opt, func() (groupEncryptor, error) {
		return publicKeyGroup{enc, pub.Params.CKKS}, nil
	})
}

// EnrollSeeded is Enroll for the owner of the key set: it encrypts under the
// secret key with the uniform halves derived from a fresh random seed per
// group, and stores only the other halves and the seed (half the bytes of
// Enroll). The server, which never sees the secret key, regenerates the
// uniform halves when it reads the group. A group it fills is re-encrypted
// under a fresh seed (seeded.EncryptSum), whatever its storage was.
func EnrollSeeded(dir string, owner *keys.Client, data []float32, n, dim int, opt EnrollOptions) (*EnrollSummary, error) {
	enc := seeded.NewEncryptor(owner.Params.CKKS, owner.Secret)
	return enroll(dir, owner.Meta, owner.Params, data, n, dim, opt, func() (groupEncryptor, error) {
		seed, err := seeded.NewSeed()
		return seededGroup{enc, seed}, err
	})
}

// groupEncryptor encrypts the diagonals of one group.
type groupEncryptor interface {
	encrypt(pt *rlwe.Plaintext, diagonal int) (*rlwe.Ciphertext, error)
	// fill returns diagonal i of a filled group: a ciphertext of what old
	// holds plus pt (old may be overwritten).
	fill(old *rlwe.Ciphertext, pt *rlwe.Plaintext, diagonal int) (*rlwe.Ciphertext, error)
	// seed is the group's seed, nil when its ciphertexts are stored whole.
	seed() *seeded.Seed
}

type publicKeyGroup struct {
	enc *rlwe.Encryptor
	p   ckks.Parameters
}

func (g publicKeyGroup) encrypt(pt *rlwe.Plaintext, _ int) (*rlwe.Ciphertext, error) {
	return g.enc.EncryptNew(pt)
}

// fill adds a fresh public-key encryption of pt to old (Lattigo's ring
// addition on both halves; a seeded old has its regenerated c1).
func (g publicKeyGroup) fill(old *rlwe.Ciphertext, pt *rlwe.Plaintext, _ int) (*rlwe.Ciphertext, error) {
	ct, err := g.enc.EncryptNew(pt)
	if err != nil {
		return nil, err
	}
	if old.Degree() != 1 || old.Level() != ct.Level() || !old.IsNTT || old.Scale.Cmp(ct.Scale) != 0 {
		return nil, fmt.Errorf("%w: a stored diagonal (degree %d, level %d) does not match a fresh one (level %d)", errs.ErrCorrupt, old.Degree(), old.Level(), ct.Level())
	}
	rq := g.p.RingQ().AtLevel(ct.Level())
	for k := range ct.Value {
		rq.Add(old.Value[k], ct.Value[k], old.Value[k])
	}
	return old, nil
}

func (publicKeyGroup) seed() *seeded.Seed { return nil }

type seededGroup struct {
	enc *seeded.Encryptor
	s   seeded.Seed
}

func (g seededGroup) encrypt(pt *rlwe.Plaintext, diagonal int) (*rlwe.Ciphertext, error) {
	return g.enc.Encrypt(pt, g.s, uint64(diagonal))
}

func (g seededGroup) fill(old *rlwe.Ciphertext, pt *rlwe.Plaintext, diagonal int) (*rlwe.Ciphertext, error) {
	return g.enc.EncryptSum(old, pt, g.s, uint64(diagonal))
}

func (g seededGroup) seed() *seeded.Seed { return &g.s }

// enroll is Enroll and EnrollSeeded; newGroup gives the encryptor of each
// group written (new or filled), with a fresh seed when seeded.
func enroll(dir string, meta *keys.Meta, set *params.Set, data []float32, n, dim int, opt EnrollOptions,
	newGroup func() (groupEncryptor, error)) (*EnrollSummary, error) {
	start := time.Now()
	m, err := Load(dir)
	if err != nil {
		return nil, err
	}
	if err := m.CheckKeys(meta); err != nil {
		return nil, err
	}
	if dim != set.Dim {
		return nil, fmt.Errorf("%w: vectors have dimension %d, the index expects %d", errs.ErrInvalid, dim, set.Dim)
	}
	if n < 1 || len(data) != n*dim {
		return nil, fmt.Errorf("%w: %d values for %d vectors of dimension %d", errs.ErrInvalid, len(data), n, dim)
	}
	if pw := m.PayloadWidth; len(opt.Payloads) != n*pw {
		if pw == 0 {
			return nil, fmt.Errorf("%w: the index holds no payloads (it was created without a payload width), %d payload values given", errs.ErrInvalid, len(opt.Payloads))
		}
		return nil, fmt.Errorf("%w: %d payload values for %d vectors of %d payload values each", errs.ErrInvalid, len(opt.Payloads), n, pw)
	}
	l, slots := set.L(), set.Slots()
	vecs := make([][]float64, n)
	for i := range vecs {
		if vecs[i], err = packing.Normalize(data[i*dim:(i+1)*dim], dim, set.Padded(), i); err != nil {
			return nil, fmt.Errorf("%w: %v", errs.ErrInvalid, err)
		}
	}
	removeStrayFiles(dir, m)

	strat, err := m.SimilarityStrategy()
	if err != nil {
		return nil, err
	}
	ecd := ckks.NewEncoder(set.CKKS)
	// plaintext encodes record i of a group: diagonal i (i < l) as the
	// layout wants it (pre-rotated for bsgs-tbe), at the top level and
	// default scale, or payload column i-l at the payload level and
	// payload.PayloadScale.
	plaintext := func(src groupPlain, i int) (*rlwe.Plaintext, error) {
		if i >= l {
			pt := ckks.NewPlaintext(set.CKKS, PayloadLevel)
			pt.Scale = rlwe.NewScale(payload.PayloadScale)
			return pt, ecd.Encode(src.columns[i-l], pt)
		}
		r := 0
		if strat.PreRotatedByEnroller() {
			r = strat.PreRotation(i)
		}
		pt := ckks.NewPlaintext(set.CKKS, set.CKKS.MaxLevel())
		return pt, ecd.Encode(src.diagonal(i, r), pt)
	}
	pw := m.PayloadWidth
	records := l + 2*pw
	// rows returns the payloads of vectors [lo, hi).
	rows := func(lo, hi int) []int16 { return opt.Payloads[lo*pw : hi*pw] }
	sum := &EnrollSummary{Added: n, GroupSlots: slots}
	commit := func(gi int, g Group, filled bool, added int) error {
		var old string
		if filled {
			old = m.Groups[gi].File
			sum.Growth -= m.Groups[gi].Bytes
			m.Count -= m.Groups[gi].Count
			m.Groups[gi] = g
		} else {
			m.Groups = append(m.Groups, g)
		}
		m.Count += g.Count
		if err := envelope.WriteJSON(filepath.Join(dir, manifestFile), m); err != nil {
			return err
		}
		if filled {
			// The manifest names the new file: the old one is no longer
			// read (a crash before this leaves it to removeStrayFiles).
			os.Remove(filepath.Join(dir, old))
			sum.GroupsFilled++
		} else {
			sum.GroupsNew++
		}
		sum.GroupsWritten++
		sum.Bytes += g.Bytes
		sum.Growth += g.Bytes
		sum.Writes = append(sum.Writes, GroupWrite{Group: gi, Filled: filled, Added: added, Count: g.Count, Bytes: g.Bytes, Seeded: g.Seeded})
		return nil
	}

	lo := 0
	if last := len(m.Groups) - 1; !opt.NewGroups && last >= 0 && m.Groups[last].Count < slots {
		lo = min(slots-m.Groups[last].Count, n)
		g, err := fillGroup(dir, m, set, last, vecs[:lo], rows(0, lo), newGroup, plaintext)
		if err != nil {
			return nil, err
		}
		if err := commit(last, g, true, lo); err != nil {
			return nil, err
		}
	}
	for ; lo < n; lo += slots {
		hi := min(lo+slots, n)
		src, err := newGroupPlain(set, vecs[lo:hi], m.ScoreScale)
		if err != nil {
			return nil, err
		}
		if pw > 0 {
			src.columns = payload.PayloadColumns(rows(lo, hi), pw, 0, slots)
		}
		genc, err := newGroup()
		if err != nil {
			return nil, err
		}
		cts := make([]*rlwe.Ciphertext, records)
		if err := parallel.For(records, func(i int) error {
			pt, err := plaintext(src, i)
			if err != nil {
				return err
			}
			cts[i], err = genc.encrypt(pt, i)
			return err
		}); err != nil {
			return nil, fmt.Errorf("encrypting group: %w", err)
		}
		g := Group{File: groupFile(len(m.Groups), 0), Start: m.Count, Count: hi - lo, Seeded: genc.seed() != nil}
		if g.Bytes, err = writeGroup(filepath.Join(dir, g.File), m, g, set.CKKS, cts, genc.seed()); err != nil {
			return nil, err
		}
		if err := commit(len(m.Groups), g, false, hi-lo); err != nil {
			return nil, err
		}
	}
	sum.Total = m.Count
	sum.Seconds = time.Since(start).Seconds()
	return sum, nil
}

// fillGroup writes group g filled with vecs (at most its free slots) to its
// next file name and returns its new manifest entry; the manifest is not
// touched. The new vectors take slots [g.Count, g.Count+len(vecs)): their
// diagonals are those of a group whose first g.Count vectors are zero, so
// that adding their encryption to the stored diagonals (or re-encrypting the
// sum under a fresh seed) gives the diagonals of the whole group. The old
// file is read in one streamed pass, each record checked (StreamGroup).
func fillGroup(dir string, m *Manifest, set *params.Set, gi int, vecs [][]float64, payloads []int16,
	newGroup func() (groupEncryptor, error), plaintext func(groupPlain, int) (*rlwe.Plaintext, error)) (Group, error) {
	l, slots := set.L(), set.Slots()
	g := m.Groups[gi]
	if g.Count+len(vecs) > slots {
		return g, fmt.Errorf("internal error: %d vectors do not fit the %d free slots of %s", len(vecs), slots-g.Count, g.File)
	}
	rows := make([][]float64, g.Count, g.Count+len(vecs))
	zero := make([]float64, set.Padded())
	for i := range rows {
		rows[i] = zero
	}
	src, err := newGroupPlain(set, append(rows, vecs...), m.ScoreScale)
	if err != nil {
		return g, err
	}
	if m.PayloadWidth > 0 {
		src.columns = payload.PayloadColumns(payloads, m.PayloadWidth, g.Count, slots)
	}
	genc, err := newGroup()
	if err != nil {
		return g, err
	}
	cts := make([]*rlwe.Ciphertext, l+2*m.PayloadWidth)
	err = StreamGroup(dir, m, set, g, max(1, min(l, 2*parallel.Workers())), func(first int, chunk []*rlwe.Ciphertext) error {
		return parallel.For(len(chunk), func(k int) error {
			i := first + k
			pt, err := plaintext(src, i)
			if err != nil {
				return err
			}
			cts[i], err = genc.fill(chunk[k], pt, i)
			return err
		})
	})
	if err != nil {
		return g, fmt.Errorf("filling group %s: %w", g.File, err)
	}
	out := Group{Start: g.Start, Count: g.Count + len(vecs), Seeded: genc.seed() != nil, Fills: g.Fills + 1}
	out.File = groupFile(gi, out.Fills)
	if out.Bytes, err = writeGroup(filepath.Join(dir, out.File), m, out, set.CKKS, cts, genc.seed()); err != nil {
		return g, err
	}
	return out, nil
}

// removeStrayFiles deletes temporary files and group files that the
// manifest does not name (left by an interrupted enrollment).
func removeStrayFiles(dir string, m *Manifest) {
	envelope.RemoveTemps(dir)
	named := map[string]bool{}
	for _, g := range m.Groups {
		named[g.File] = true
	}
	files, _ := filepath.Glob(filepath.Join(dir, "group-*.ct"))
	for _, f := range files {
		if !named[filepath.Base(f)] {
			os.Remove(f)
		}
	}
}
