package irisdb

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"encmatch/core/base/envelope"
	"encmatch/core/base/errs"
	"encmatch/core/iris/ccmm"
	"encmatch/core/iris/iriskeys"
)

// Enrollment without a key holder (a threshold key set, package irissetup;
// docs/IRIS.md, "Enrollment without a key holder"), in three steps and as
// many processes:
//
//  1. EnrollPublic (the enroller, public material only) writes Enc
//     (enc.bin, its a-part stored), the masks, the blocks' keys and
//     pending.json.
//  2. ContributeEncS (each party, with its query-secret shares) reads
//     enc.bin and writes its contribution to EncS, bound to that enc.bin.
//  3. CompleteEnrollment (anyone) adds the contributions, one per party,
//     into encs.bin and writes db.json: only then does a server load the
//     database.

// pendingFile is the description of a database whose EncS is not made yet.
const pendingFile = "pending.json"

// kindContribution is the envelope kind of an EncS contribution.
const kindContribution = "iris-db-encs-contribution"

// EnrollPublic starts the enrollment of a gallery of masked codes into dir
// with the enroller's public material (blocks of N_db codes, at most as
// many as the setup made keys for), threshold t as Enroll's.
func EnrollPublic(en *iriskeys.Enroller, dir string, codes Codes, t float64) (*Meta, error) {
	p := en.Params
	if err := checkGallery(p, codes, t); err != nil {
		return nil, err
	}
	n := p.CCMM.NDB
	blocks := (codes.Rows + n - 1) / n
	if blocks > len(en.Blocks) {
		return nil, fmt.Errorf("%w: %d codes take %d blocks of %d; the setup made keys for %d", errs.ErrInvalid, codes.Rows, blocks, n, len(en.Blocks))
	}
	for _, f := range []string{"db.json", pendingFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			return nil, fmt.Errorf("%w: %s already holds an encrypted iris database (%s)", errs.ErrInvalid, dir, f)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	pk := &ccmm.PublicKey{A: en.DBKey.A, B: en.DBKey.B[:blocks]}
	padded := paddedCodes{Codes: codes, rows: blocks * n}
	enc := matrixFiles(p, blocks)[0]
	if err := envelope.WriteFileAt(filepath.Join(dir, enc.name), en.Header(enc.kind), enc.head.EncodedSize(), 0o644, func(w io.WriterAt) error {
		return p.CCMM.EncryptDBPKTo(pk, padded, w)
	}); err != nil {
		return nil, err
	}
	if err := writeMasksAndBlockKeys(en.KeySet, dir, codes, blocks*n, en.Blocks[:blocks]); err != nil {
		return nil, err
	}
	meta := &Meta{Format: formatDB, KeyID: en.Meta.KeyID, Fingerprint: p.Fingerprint(), Codes: codes.Rows, Blocks: blocks, T: t, Delta: 1 - 2*t}
	if err := envelope.WriteJSON(filepath.Join(dir, pendingFile), meta); err != nil {
		return nil, err
	}
	return meta, envelope.SyncDir(dir)
}

// pending reads a database's pending.json, checked against the key set.
func pending(ks *iriskeys.KeySet, dir string) (*Meta, error) {
	var meta Meta
	if err := envelope.ReadJSON(filepath.Join(dir, pendingFile), "pending iris database", &meta); err != nil {
		return nil, err
	}
	p := ks.Params
	if meta.Format != formatDB || meta.KeyID != ks.Meta.KeyID || meta.Fingerprint != p.Fingerprint() ||
		meta.Blocks < 1 || meta.Blocks > iriskeys.MaxBlocks || meta.Codes < 1 || meta.Codes > meta.Blocks*p.CCMM.NDB {
		return nil, fmt.Errorf("%w: %s: a pending database of %d codes in %d blocks for key set %s (%s); this key set is %s (%s)",
			errs.ErrMismatch, dir, meta.Codes, meta.Blocks, meta.KeyID, meta.Fingerprint, ks.Meta.KeyID, p.Fingerprint())
	}
	return &meta, nil
}

// contributionHead is the JSON header of an EncS contribution: its party
// and the checksum of the enc.bin it was made from.
type contributionHead struct {
	Party int    `json:"party"`
	Enc   string `json:"enc_sha256"`
}

// encChecksum is the stored checksum of dir's enc.bin.
func encChecksum(ks *iriskeys.KeySet, dir string) (string, error) {
	enc := matrixFiles(ks.Params, 1)[0]
	f, err := envelope.OpenPayload(filepath.Join(dir, enc.name), ks.Header(enc.kind))
	if err != nil {
		return "", err
	}
	defer f.Close()
	sum, err := f.StoredChecksum()
	return hex.EncodeToString(sum[:]), err
}

// ContributeEncS is party's step of a public enrollment: from the pending
// database in dir (its enc.bin streamed, every residue and the frame's
// checksum checked) and the party's query-secret shares, its EncS
// contribution (ccmm.Params.EncSShareFrom), written to out and bound to
// that enc.bin. Memory holds the contribution and a band of Enc (about
// 6.7 GB for one block at the threshold preset).
func ContributeEncS(en *iriskeys.Enroller, dir string, party int, shares ccmm.Keys, out string) error {
	p := en.Params
	if party < 1 || party > p.Preset.Parties {
		return fmt.Errorf("%w: party %d of %d", errs.ErrInvalid, party, p.Preset.Parties)
	}
	meta, err := pending(en.KeySet, dir)
	if err != nil {
		return err
	}
	enc := matrixFiles(p, meta.Blocks)[0]
	f, err := envelope.OpenVerifyingPayload(filepath.Join(dir, enc.name), en.Header(enc.kind))
	if err != nil {
		return err
	}
	defer f.Close()
	stored, err := f.StoredChecksum()
	if err != nil {
		return err
	}
	sum := hex.EncodeToString(stored[:])
	r, err := ccmm.NewSharedAReader(f, f.Len, enc.head)
	if err != nil {
		return fmt.Errorf("%s: %w", enc.name, err)
	}
	pk := &ccmm.PublicKey{A: en.DBKey.A, B: en.DBKey.B[:meta.Blocks]}
	c, err := p.CCMM.EncSShareFrom(pk, r, shares)
	if err != nil {
		return fmt.Errorf("%s: %w", enc.name, err)
	}
	if err := f.Verify(); err != nil {
		return err
	}
	head, err := json.Marshal(contributionHead{Party: party, Enc: sum})
	if err != nil {
		return err
	}
	headChunk := envelope.AppendChunk(nil, head)
	size := c.EncodedSize()
	return envelope.WriteFileStream(out, en.Header(kindContribution), int64(len(headChunk))+8+size, 0o644, func(w io.Writer) error {
		if _, err := w.Write(binary.LittleEndian.AppendUint64(headChunk, uint64(size))); err != nil {
			return err
		}
		_, err := c.WriteTo(w)
		return err
	})
}

// maxContributionHead bounds the JSON header of a contribution.
const maxContributionHead = 1 << 12

// readContribution reads the header of a contribution's payload of n
// bytes and returns it with the length of the matrix that follows.
func readContribution(r io.Reader, n int64) (*contributionHead, int64, error) {
	var lens [8]byte
	if _, err := io.ReadFull(r, lens[:]); err != nil {
		return nil, 0, fmt.Errorf("%w: %v", errs.ErrCorrupt, err)
	}
	hl := binary.LittleEndian.Uint64(lens[:])
	if hl > maxContributionHead || int64(hl)+16 > n {
		return nil, 0, fmt.Errorf("%w: a header of %d bytes", errs.ErrCorrupt, hl)
	}
	hb := make([]byte, hl)
	if _, err := io.ReadFull(r, hb); err != nil {
		return nil, 0, fmt.Errorf("%w: %v", errs.ErrCorrupt, err)
	}
	var head contributionHead
	if err := json.Unmarshal(hb, &head); err != nil {
		return nil, 0, fmt.Errorf("%w: %v", errs.ErrCorrupt, err)
	}
	if _, err := io.ReadFull(r, lens[:]); err != nil {
		return nil, 0, fmt.Errorf("%w: %v", errs.ErrCorrupt, err)
	}
	body := int64(binary.LittleEndian.Uint64(lens[:]))
	if body != n-int64(hl)-16 {
		return nil, 0, fmt.Errorf("%w: a matrix of %d bytes in %d", errs.ErrCorrupt, body, n-int64(hl)-16)
	}
	return &head, body, nil
}

// CompleteEnrollment finishes a public enrollment in dir from the
// contributions (files of ContributeEncS, one per party, each made from
// this enc.bin): their sum is written as encs.bin, then db.json, and
// pending.json is removed.
func CompleteEnrollment(en *iriskeys.Enroller, dir string, contributions []string) (*Meta, error) {
	p := en.Params
	meta, err := pending(en.KeySet, dir)
	if err != nil {
		return nil, err
	}
	sum, err := encChecksum(en.KeySet, dir)
	if err != nil {
		return nil, err
	}
	encs := matrixFiles(p, meta.Blocks)[1]
	acc, err := p.CCMM.NewEncSSum(meta.Blocks * p.CCMM.NDB)
	if err != nil {
		return nil, err
	}
	seen := map[int]bool{}
	for _, path := range contributions {
		err := envelope.ReadFileStream(path, en.Header(kindContribution), func(r io.Reader, n int64) error {
			head, body, err := readContribution(r, n)
			if err != nil {
				return err
			}
			switch {
			case head.Party < 1 || head.Party > p.Preset.Parties || seen[head.Party]:
				return fmt.Errorf("%w: a contribution of party %d (parties 1..%d, each once)", errs.ErrInvalid, head.Party, p.Preset.Parties)
			case head.Enc != sum:
				return fmt.Errorf("%w: made from another enc.bin than %s's", errs.ErrMismatch, dir)
			}
			seen[head.Party] = true
			mr, err := ccmm.NewSharedAReader(r, body, encs.head)
			if err != nil {
				return err
			}
			return acc.Add(mr)
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	total, err := acc.Result()
	if err != nil {
		return nil, err
	}
	if err := envelope.WriteFileStream(filepath.Join(dir, encs.name), en.Header(encs.kind), encs.head.EncodedSize(), 0o644, func(w io.Writer) error {
		_, err := total.WriteTo(w)
		return err
	}); err != nil {
		return nil, err
	}
	if err := envelope.WriteJSON(filepath.Join(dir, "db.json"), meta); err != nil {
		return nil, err
	}
	if err := os.Remove(filepath.Join(dir, pendingFile)); err != nil {
		return nil, err
	}
	return meta, envelope.SyncDir(dir)
}
