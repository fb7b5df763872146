// Package irisdb holds encrypted iris databases (docs/IRIS.md, "Roles and
// files"): the key holder's Enroll encrypts a gallery of masked codes into
// one (for a threshold key set, with no key holder: EnrollPublic, each
// party's ContributeEncS and CompleteEnrollment), the server's Load checks
// and loads it, and OpenMatrices streams its encrypted matrices, a block
// at a time, into the product.
package irisdb

import (
	"bytes"
	"crypto/sha256"
	"encoding"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"path/filepath"

	"encmatch/core/base/codec"
	"encmatch/core/base/envelope"
	"encmatch/core/base/errs"
	"encmatch/core/base/parallel"
	"encmatch/core/iris/ccmm"
	"encmatch/core/iris/fold"
	"encmatch/core/iris/iriskeys"
	"encmatch/core/iris/irisparams"
	"encmatch/core/iris/scoreslots"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
)

// Directory layout of an encrypted database (Enroll):
//
//	db.json         what it holds: key set, codes, blocks, threshold
//	enc.bin         Enc  = Enc_{S_db}(K M)      (ccmm.DB.Enc)
//	encs.bin        EncS = Enc_{S_db}(K M S_q)  (ccmm.DB.EncS)
//	masks.bin       the codes' masks, in the clear (papers/004 §3.1)
//	blocks.keys     per block, the key from its database secret to the bootstrapping ring's
//	design.json     folding presets: the fold design (python's encmatch.iris.folding), as given
//	fold.keys       folding presets: per block, the fold's relinearisation and conjugation keys
const formatDB = "encmatch-iris-db/3"

// Meta is db.json.
type Meta struct {
	Format      string  `json:"format"`
	KeyID       string  `json:"key_id"`
	Fingerprint string  `json:"fingerprint"`
	Codes       int     `json:"codes"`
	Blocks      int     `json:"blocks"`
	T           float64 `json:"t"`     // match iff FHD < t
	Delta       float64 `json:"delta"` // 1 - 2t, the threshold on normalised scores
	// Fold: the codes are slot-encoded for papers/004's second algorithm
	// (a folding preset), with design.json and fold.keys.
	Fold bool `json:"fold,omitempty"`
}

// Codes is a matrix of masked iris codes c' = m (1 - 2c) in {-1, 0, 1},
// one code per row, row-major.
type Codes struct {
	Rows, Len int
	Data      []int8
}

// Check refuses codes of another length than inner or entries outside
// {-1, 0, 1}, and rows whose mask is empty (what names them in errors).
func (c Codes) Check(inner int, what string) error {
	if c.Len != inner || c.Rows <= 0 || len(c.Data) != c.Rows*c.Len {
		return fmt.Errorf("%w: %s: %d codes of %d positions (%d values); this key set takes codes of %d", errs.ErrInvalid, what, c.Rows, c.Len, len(c.Data), inner)
	}
	for r := 0; r < c.Rows; r++ {
		set := false
		for _, v := range c.Data[r*c.Len : (r+1)*c.Len] {
			if v < -1 || v > 1 {
				return fmt.Errorf("%w: %s: code %d has the value %d (masked codes are -1, 0 or 1)", errs.ErrInvalid, what, r, v)
			}
			set = set || v != 0
		}
		if !set {
			return fmt.Errorf("%w: %s: code %d has an empty mask", errs.ErrInvalid, what, r)
		}
	}
	return nil
}

// Masks packs the rows' masks (c' != 0) into bits, Len/64 words per row,
// rows padded with zeros up to rows (pad rows have empty masks).
func (c Codes) Masks(rows int) []uint64 {
	words := c.Len / 64
	out := make([]uint64, rows*words)
	for r := 0; r < c.Rows; r++ {
		for l, v := range c.Data[r*c.Len : (r+1)*c.Len] {
			if v != 0 {
				out[r*words+l/64] |= 1 << (l % 64)
			}
		}
	}
	return out
}

// Enroll encrypts a database of masked codes into dir (which must not hold
// one) with threshold t (a pair matches iff its fractional Hamming distance
// is below t): the codes are padded with empty rows to whole blocks of N_db,
// each block gets a fresh database secret, the database is encrypted in
// the RGSW-style shared-a format of papers/004 §6.1.1 (which needs the query
// secrets), and each block's key to the bootstrapping ring's secret is
// made. The database secrets are then dropped: nothing needs them again.
//
// With a folding preset, design is the fold design for t (python's
// encmatch.iris.folding, JSON): it is checked against the preset, the
// blocks are slot-encoded (package slotdb) before encryption and each
// block's fold keys are made. Other presets take no design.
func Enroll(h *iriskeys.Holder, dir string, codes Codes, t float64, design []byte) (*Meta, error) {
	p := h.Params
	if err := checkGallery(p, codes, t); err != nil {
		return nil, err
	}
	var fp *fold.Params
	switch {
	case p.Folds():
		var err error
		if _, fp, err = checkDesign(p, design, t); err != nil {
			return nil, err
		}
	case design != nil:
		return nil, fmt.Errorf("%w: preset %s does not fold: it takes no fold design", errs.ErrInvalid, p.Preset.Name)
	}
	if _, err := os.Stat(filepath.Join(dir, "db.json")); err == nil {
		return nil, fmt.Errorf("%w: %s already holds an encrypted iris database", errs.ErrInvalid, dir)
	}
	n := p.CCMM.NDB
	blocks := (codes.Rows + n - 1) / n
	padded := paddedCodes{Codes: codes, rows: blocks * n}
	var m ccmm.Matrix = padded
	if fp != nil {
		var err error
		if m, err = slotEncode(p, padded); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	sk := &ccmm.Secrets{DB: ccmm.GenKeys(p.CCMM.DB, blocks), Query: h.Query}
	// Enc and EncS are written a band of columns at a time: at the default
	// preset they take 7.25 GB per block of 2^14 codes.
	files := matrixFiles(p, blocks)
	enc, encs := files[0], files[1]
	err := envelope.WriteFileAt(filepath.Join(dir, enc.name), h.Header(enc.kind), enc.head.EncodedSize(), 0o644, func(encW io.WriterAt) error {
		return envelope.WriteFileAt(filepath.Join(dir, encs.name), h.Header(encs.kind), encs.head.EncodedSize(), 0o644, func(encsW io.WriterAt) error {
			return p.CCMM.EncryptDBTo(sk, m, encW, encsW)
		})
	})
	if err != nil {
		return nil, err
	}
	keys := &scoreslots.Keys{Secret: h.Bootstrap}
	for _, s := range sk.DB {
		if err := p.Slots.AddBlock(keys, s); err != nil {
			return nil, err
		}
	}
	meta := &Meta{Format: formatDB, KeyID: h.Meta.KeyID, Fingerprint: p.Fingerprint(), Codes: codes.Rows, Blocks: blocks, T: t, Delta: 1 - 2*t, Fold: fp != nil}
	if fp != nil {
		if err := writeFoldFiles(h, dir, fp, sk.DB, design); err != nil {
			return nil, err
		}
	}
	if err := writeMasksAndBlockKeys(h.KeySet, dir, codes, blocks*n, keys.Blocks); err != nil {
		return nil, err
	}
	// db.json last: a directory without it is not a database (a crash
	// before this point leaves nothing that loads).
	if err := envelope.WriteJSON(filepath.Join(dir, "db.json"), meta); err != nil {
		return nil, err
	}
	return meta, envelope.SyncDir(dir)
}

// checkGallery refuses a threshold t outside (0, 1) and codes the key
// set cannot take (Codes.Check).
func checkGallery(p *irisparams.Params, codes Codes, t float64) error {
	if math.IsNaN(t) || t <= 0 || t >= 1 {
		return fmt.Errorf("%w: threshold t = %v: a fractional Hamming distance in (0, 1)", errs.ErrInvalid, t)
	}
	return codes.Check(p.CCMM.Lit.Inner, "gallery")
}

// writeMasksAndBlockKeys writes a database's masks.bin (the codes' masks,
// padded to rows rows) and blocks.keys (each block's key into the
// bootstrapping ring), bound to the key set ks.
func writeMasksAndBlockKeys(ks *iriskeys.KeySet, dir string, codes Codes, rows int, keys []*rlwe.EvaluationKey) error {
	var mb bytes.Buffer
	if err := WriteWords(&mb, codes.Masks(rows)); err != nil {
		return err
	}
	if err := envelope.WriteFile(filepath.Join(dir, "masks.bin"), ks.Header("iris-db-masks"), mb.Bytes(), 0o644); err != nil {
		return err
	}
	var kb bytes.Buffer
	if err := envelope.WriteChunks(&kb, keys); err != nil {
		return err
	}
	return envelope.WriteFile(filepath.Join(dir, "blocks.keys"), ks.Header("iris-db-block-keys"), kb.Bytes(), 0o644)
}

// checkDesign reads a fold design for threshold t and builds its fold on
// the preset (which checks it against the comparator).
func checkDesign(p *irisparams.Params, design []byte, t float64) (*fold.Design, *fold.Params, error) {
	if design == nil {
		return nil, nil, fmt.Errorf("%w: preset %s folds: enrollment needs a fold design for t = %v (encmatch iris fold)", errs.ErrInvalid, p.Preset.Name, t)
	}
	d, err := fold.ReadDesign(design)
	if err != nil {
		return nil, nil, err
	}
	if d.T != t || math.Abs(d.Delta-(1-2*t)) > 1e-12 {
		return nil, nil, fmt.Errorf("%w: a fold design for t = %v (delta %v), the database's threshold is t = %v", errs.ErrMismatch, d.T, d.Delta, t)
	}
	fp, _, err := p.DesignFold(d, 1)
	return d, fp, err
}

// slotEncode is the padded gallery slot-encoded block by block (package
// slotdb), every entry checked against the preset's bound.
func slotEncode(p *irisparams.Params, c paddedCodes) (ccmm.IntMat, error) {
	n := p.CCMM.NDB
	out := ccmm.NewIntMat(c.rows, c.Len)
	block := ccmm.NewIntMat(n, c.Len)
	for t := range c.rows / n {
		for i := range n {
			for j := range c.Len {
				block.Data[i*c.Len+j] = c.At(t*n+i, j)
			}
		}
		enc, err := p.Encoder.Encode(block)
		if err != nil {
			return ccmm.IntMat{}, err
		}
		if m := enc.MaxAbs(); m > p.CCMM.Lit.MaxAbsDB {
			return ccmm.IntMat{}, fmt.Errorf("%w: the slot encoding of block %d reaches %d, over preset %s's bound %d (its noise bound assumes it): a gallery this skewed needs a preset with a smaller encoding scale",
				errs.ErrInvalid, t, m, p.Preset.Name, p.CCMM.Lit.MaxAbsDB)
		}
		copy(out.Data[t*n*c.Len:], enc.Data)
	}
	return out, nil
}

// writeFoldFiles writes a folding database's design (as given) and each
// block's fold keys (relinearisation, then conjugation).
func writeFoldFiles(h *iriskeys.Holder, dir string, fp *fold.Params, dbSecrets []*rlwe.SecretKey, design []byte) error {
	if err := envelope.WriteFile(filepath.Join(dir, designFile), h.Header(kindDesign), design, 0o644); err != nil {
		return err
	}
	var kb bytes.Buffer
	for _, s := range dbSecrets {
		keys, err := fp.GenKeys(s)
		if err != nil {
			return err
		}
		gk, err := keys.GetGaloisKey(fp.CKKS.GaloisElementForComplexConjugation())
		if err != nil {
			return err
		}
		if err := envelope.WriteChunks(&kb, []encoding.BinaryMarshaler{keys.RelinearizationKey, gk}); err != nil {
			return err
		}
	}
	return envelope.WriteFile(filepath.Join(dir, foldKeysFile), h.Header(kindFoldKeys), kb.Bytes(), 0o644)
}

// Files and frames of a folding database.
const (
	designFile   = "design.json"
	foldKeysFile = "fold.keys"
	kindDesign   = "iris-db-fold-design"
	kindFoldKeys = "iris-db-fold-keys"
)

// paddedCodes is the gallery as the CCMM's database matrix: its rows
// padded with empty codes to rows.
type paddedCodes struct {
	Codes
	rows int
}

// Dims is the matrix's shape: rows x code length.
func (c paddedCodes) Dims() (rows, cols int) { return c.rows, c.Len }

// At is entry (i, j): 0 in a pad row.
func (c paddedCodes) At(i, j int) int64 {
	if i >= c.Rows {
		return 0
	}
	return int64(c.Data[i*c.Len+j])
}

// matrixFile is one of a database's two encrypted matrices: its file, the
// kind of its frame and its shape (not allocated).
type matrixFile struct {
	name, kind string
	head       *ccmm.SharedA
}

// matrixFiles are Enc and EncS, in that order, for a database of blocks
// blocks.
func matrixFiles(p *irisparams.Params, blocks int) [2]matrixFile {
	c := p.CCMM
	rows := blocks * c.NDB
	return [2]matrixFile{{"enc.bin", "iris-db-enc", c.DBShape(rows, c.Lit.Inner)}, {"encs.bin", "iris-db-encs", c.DBShape(rows, c.NQ)}}
}

// DB is a loaded encrypted database (the server's view). Its encrypted
// matrices stay on disk (7.25 GB per block at the default preset) and are
// read a block at a time by Match.
type DB struct {
	Meta   Meta
	Dir    string
	Masks  []uint64 // Blocks*N_db rows of Inner/64 words
	Blocks []*rlwe.EvaluationKey
	// Folding databases: the design and each block's fold keys.
	Design   *fold.Design
	FoldKeys []rlwe.EvaluationKeySet
	// MatricesDigest names the contents of the encrypted matrices (a
	// SHA-256 of their frames' checksums): a product kept between two
	// passes is bound to it.
	MatricesDigest [sha256.Size]byte
}

// OpenMatrices opens the database's two matrix files for a streamed
// product by the server s, in one pass: the frames' headers and sizes and
// the matrices' headers are checked now, every residue as a product reads
// it, and the frames' checksums by verify, which hashes what the product
// left unread and must return nil before the product is used (a 2^14-code
// folding database is 32 GB, more than a server's page cache: a first
// pass for the checksums read it from disk twice). closeAll closes the
// files.
func OpenMatrices(s *iriskeys.Server, db *DB) (src ccmm.DBBlocks, verify func() error, closeAll func(), err error) {
	var rs []*ccmm.SharedAReader
	var files []*envelope.VerifyingPayload
	closeAll = func() {
		for _, f := range files {
			f.Close()
		}
	}
	verify = func() error {
		for _, f := range files {
			if err := f.Verify(); err != nil {
				return err
			}
		}
		return nil
	}
	for _, part := range matrixFiles(s.Params, db.Meta.Blocks) {
		f, err := envelope.OpenVerifyingPayload(filepath.Join(db.Dir, part.name), s.Header(part.kind))
		if err != nil {
			closeAll()
			return nil, nil, nil, err
		}
		files = append(files, f)
		r, err := ccmm.NewSharedAReader(f, f.Len, part.head)
		if err != nil {
			closeAll()
			return nil, nil, nil, fmt.Errorf("%s: %w", part.name, err)
		}
		rs = append(rs, r)
	}
	src, blocks, err := s.Params.CCMM.ReadDB(rs[0], rs[1])
	if err == nil && blocks != db.Meta.Blocks {
		err = fmt.Errorf("%w: %d blocks in the matrices, %d in db.json", errs.ErrCorrupt, blocks, db.Meta.Blocks)
	}
	if err != nil {
		closeAll()
		return nil, nil, nil, err
	}
	return src, verify, closeAll, nil
}

// Load loads the encrypted database in dir for the server s.
func Load(s *iriskeys.Server, dir string) (*DB, error) {
	p := s.Params
	var meta Meta
	if err := envelope.ReadJSON(filepath.Join(dir, "db.json"), "iris database", &meta); err != nil {
		return nil, err
	}
	switch {
	case meta.Format != formatDB:
		return nil, fmt.Errorf("%w: %s: format %q, expected %q", errs.ErrCorrupt, dir, meta.Format, formatDB)
	case meta.KeyID != s.Meta.KeyID || meta.Fingerprint != p.Fingerprint():
		return nil, fmt.Errorf("%w: %s was enrolled for key set %s (%s), the server holds %s (%s)", errs.ErrMismatch, dir, meta.KeyID, meta.Fingerprint, s.Meta.KeyID, p.Fingerprint())
	case meta.Blocks < 1 || meta.Blocks > 1<<12 || meta.Codes < 1 || meta.Codes > meta.Blocks*p.CCMM.NDB || meta.Codes <= (meta.Blocks-1)*p.CCMM.NDB:
		return nil, fmt.Errorf("%w: %s: %d codes in %d blocks of %d", errs.ErrCorrupt, dir, meta.Codes, meta.Blocks, p.CCMM.NDB)
	case !(meta.T > 0 && meta.T < 1) || meta.Delta != 1-2*meta.T:
		return nil, fmt.Errorf("%w: %s: threshold t = %v, delta = %v", errs.ErrCorrupt, dir, meta.T, meta.Delta)
	}
	rows := meta.Blocks * p.CCMM.NDB
	db := &DB{Meta: meta, Dir: dir}
	// The encrypted matrices: frames' and matrices' headers checked now,
	// their contents named by their frames' checksums; OpenMatrices
	// verifies the checksums as a product reads them.
	digest := sha256.New()
	for _, part := range matrixFiles(p, meta.Blocks) {
		f, err := envelope.OpenPayload(filepath.Join(dir, part.name), s.Header(part.kind))
		if err != nil {
			return nil, err
		}
		sum, err := f.StoredChecksum()
		if err == nil {
			_, err = ccmm.NewSharedAReader(f, f.Len, part.head)
		}
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, part.name), err)
		}
		digest.Write(sum[:])
	}
	copy(db.MatricesDigest[:], digest.Sum(nil))
	b, err := envelope.ReadFile(filepath.Join(dir, "masks.bin"), s.Header("iris-db-masks"))
	if err != nil {
		return nil, err
	}
	if db.Masks, err = ReadWords(b, rows*p.CCMM.Lit.Inner/64, "database masks"); err != nil {
		return nil, err
	}
	if b, err = envelope.ReadFile(filepath.Join(dir, "blocks.keys"), s.Header("iris-db-block-keys")); err != nil {
		return nil, err
	}
	if db.Blocks, err = iriskeys.DecodeBlockKeys(b, meta.Blocks, p); err != nil {
		return nil, err
	}
	if meta.Fold != p.Folds() {
		return nil, fmt.Errorf("%w: %s: fold %v in db.json, preset %s folds: %v", errs.ErrCorrupt, dir, meta.Fold, p.Preset.Name, p.Folds())
	}
	if meta.Fold {
		if err := loadFoldFiles(s, db); err != nil {
			return nil, err
		}
	}
	return db, nil
}

// loadFoldFiles reads a folding database's design (checked against the
// preset and the threshold) and fold keys.
func loadFoldFiles(s *iriskeys.Server, db *DB) error {
	b, err := envelope.ReadFile(filepath.Join(db.Dir, designFile), s.Header(kindDesign))
	if err != nil {
		return err
	}
	d, fp, err := checkDesign(s.Params, b, db.Meta.T)
	if err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(db.Dir, designFile), err)
	}
	db.Design = d
	path := filepath.Join(db.Dir, foldKeysFile)
	if b, err = envelope.ReadFile(path, s.Header(kindFoldKeys)); err != nil {
		return err
	}
	parts, err := envelope.Chunks(b, 2*db.Meta.Blocks, "fold keys")
	if err != nil {
		return err
	}
	for t := range db.Meta.Blocks {
		rlk, err := codec.DecodeRelinearizationKey(parts[2*t], fp.CKKS, fmt.Sprintf("%s: block %d's relinearisation key", path, t))
		if err != nil {
			return err
		}
		gk, err := codec.DecodeGaloisKey(parts[2*t+1], fp.CKKS, fmt.Sprintf("%s: block %d's conjugation key", path, t))
		if err != nil {
			return err
		}
		if gk.GaloisElement != fp.CKKS.GaloisElementForComplexConjugation() {
			return fmt.Errorf("%w: %s: block %d's Galois key is for element %d, not conjugation", errs.ErrCorrupt, path, t, gk.GaloisElement)
		}
		db.FoldKeys = append(db.FoldKeys, rlwe.NewMemEvaluationKeySet(rlk, gk))
	}
	return nil
}

// WriteWords writes words as little-endian uint64.
func WriteWords(w io.Writer, words []uint64) error {
	b := make([]byte, 8*len(words))
	for i, v := range words {
		for k := 0; k < 8; k++ {
			b[8*i+k] = byte(v >> (8 * k))
		}
	}
	_, err := w.Write(b)
	return err
}

// ReadWords reads exactly n little-endian uint64 from b (ErrCorrupt on
// another length; what names them in errors).
func ReadWords(b []byte, n int, what string) ([]uint64, error) {
	if len(b) != 8*n {
		return nil, fmt.Errorf("%w: %s: %d bytes, expected %d", errs.ErrCorrupt, what, len(b), 8*n)
	}
	out := make([]uint64, n)
	for i := range out {
		for k := 0; k < 8; k++ {
			out[i] |= uint64(b[8*i+k]) << (8 * k)
		}
	}
	return out, nil
}

// Overlaps computes |m_row and m_col| for every database row and query
// column from packed masks (words per mask), rows x cols, row-major.
func Overlaps(db []uint64, q []uint64, rows, cols, words int) []int32 {
	out := make([]int32, rows*cols)
	_ = parallel.For(rows, func(r int) error {
		a := db[r*words : (r+1)*words]
		for c := 0; c < cols; c++ {
			b := q[c*words : (c+1)*words]
			s := 0
			for i := range a {
				s += bits.OnesCount64(a[i] & b[i])
			}
			out[r*cols+c] = int32(s)
		}
		return nil
	})
	return out
}
