package threshold

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"encmatch/core/base/envelope"
	"encmatch/core/base/errs"
)

// Every decryption share gives the receiver a fresh sample of the
// decryptor's flooding noise; Q shares of one ciphertext shrink the
// flooding that hides its noise by sqrt(Q). A decryptor therefore keeps a
// journal beside its share file of every search it has shared, written
// atomically (temporary file, fsync, rename, fsync of the directory)
// before the share is handed out, and refuses a search that repeats a
// ciphertext (query or result, compared by their level-0 coefficients)
// of a search shared before, whatever the participants or receiver.

// KindJournal is the envelope kind of a decryptor's journal.
const KindJournal = "threshold-journal"

// journalPattern names party i's journal, beside its share file.
const journalPattern = "decryption-journal-%d.bin"

// maxJournal bounds a journal file (about a million entries).
const maxJournal = 1 << 30

// JournalFile is the name of party id's decryption journal.
func JournalFile(id int) string { return fmt.Sprintf(journalPattern, id) }

// JournalEntry records one decryption share a decryptor made.
type JournalEntry struct {
	Time        string   `json:"time"`
	Transcript  string   `json:"transcript"`
	Index       string   `json:"index"`
	Generation  int64    `json:"generation"`
	Mode        string   `json:"mode"`
	Query       string   `json:"query"`       // level-0 digest of the query ciphertext
	Ciphertexts []string `json:"ciphertexts"` // level-0 digests of the result ciphertexts
	Parties     []int    `json:"parties"`
	Receiver    string   `json:"receiver"`
}

// ReadJournal reads a decryptor's journal; a missing file is an empty one.
// A journal that does not belong to the share's key set, is truncated or
// altered is refused (the decryptor then shares nothing until it is
// restored).
func (s *Share) ReadJournal() ([]JournalEntry, error) {
	if s.Journal == "" {
		return nil, fmt.Errorf("%w: decryptor %d has no journal (load its share with LoadShare)", errs.ErrInvalid, s.Party)
	}
	st, err := os.Stat(s.Journal)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if st.Size() > maxJournal {
		return nil, fmt.Errorf("%w: %s: journal of %d bytes", errs.ErrCorrupt, s.Journal, st.Size())
	}
	data, err := os.ReadFile(s.Journal)
	if err != nil {
		return nil, err
	}
	entries, err := decodeJournal(data, s.Config.header(KindJournal))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Journal, err)
	}
	return entries, nil
}

// decodeJournal decodes a journal's bytes.
func decodeJournal(data []byte, want envelope.Header) ([]JournalEntry, error) {
	payload, err := envelope.OpenExpect(data, want)
	if err != nil {
		return nil, err
	}
	var entries []JournalEntry
	if err := json.Unmarshal(payload, &entries); err != nil {
		return nil, fmt.Errorf("%w: journal: %v", errs.ErrCorrupt, err)
	}
	return entries, nil
}

// writeJournal replaces the journal atomically and durably.
func (s *Share) writeJournal(entries []JournalEntry) error {
	js, err := json.Marshal(entries)
	if err != nil {
		return err
	}
	return envelope.WriteFile(s.Journal, s.Config.header(KindJournal), js, privateFileMode)
}

// lockJournal takes an exclusive advisory lock on the journal's lock file,
// so that two processes of one decryptor cannot both share a ciphertext.
func (s *Share) lockJournal() (func(), error) {
	if s.Journal == "" {
		return nil, fmt.Errorf("%w: decryptor %d has no journal (load its share with LoadShare)", errs.ErrInvalid, s.Party)
	}
	f, err := os.OpenFile(s.Journal+".lock", os.O_CREATE|os.O_RDWR, privateFileMode)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", f.Name(), err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// checkFresh refuses an input that repeats a ciphertext of a search the
// decryptor has already shared.
func (s *Share) checkFresh(entries []JournalEntry, in *Input) error {
	mine := append([]string{in.QueryDigest}, in.Digests...)
	for _, e := range entries {
		seen := append([]string{e.Query}, e.Ciphertexts...)
		for _, d := range mine {
			if !slices.Contains(seen, d) {
				continue
			}
			what := "a ciphertext of this search"
			switch {
			case e.Transcript == in.Search.Transcript:
				what = "this search"
			case d == in.QueryDigest:
				what = "this search's query"
			}
			return fmt.Errorf("decryptor %d already made a decryption share of %s (search %.16s of index %q generation %d, %s, at %s for parties %v): "+
				"a second share of one ciphertext would shrink the flooding that hides its noise (docs/THRESHOLD.md): refused (journal %s): %w",
				s.Party, what, e.Transcript, e.Index, e.Generation, e.Mode, e.Time, e.Parties, s.Journal, fs.ErrExist)
		}
	}
	return nil
}

// newEntry is the journal entry of a share of in.
func newEntry(in *Input, parties []int, recv *ReceiverPublic) JournalEntry {
	return JournalEntry{Time: time.Now().UTC().Format(time.RFC3339Nano), Transcript: in.Search.Transcript,
		Index: in.Search.Index, Generation: in.Search.Generation, Mode: in.Search.Mode, Query: in.QueryDigest,
		Ciphertexts: in.Digests, Parties: parties, Receiver: recv.Digest}
}

// defaultJournal is the journal path of a share file.
func defaultJournal(sharePath string, party int) string {
	return filepath.Join(filepath.Dir(sharePath), JournalFile(party))
}
