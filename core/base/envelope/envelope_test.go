package envelope

import (
	"bytes"
	"encmatch/core/base/errs"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestRoundTripAndExpect(t *testing.T) {
	h := Header{Kind: "query", Fingerprint: "fp", KeyID: "k1"}
	data := Seal(h, []byte("payload"))
	got, p, err := Open(data)
	if err != nil || got != h || string(p) != "payload" {
		t.Fatalf("round trip: %v %v %q", err, got, p)
	}
	if _, err := OpenExpect(data, Header{Kind: "result"}); !errors.Is(err, ErrMismatch) {
		t.Fatalf("kind mismatch not reported: %v", err)
	}
	if _, err := OpenExpect(data, Header{Fingerprint: "other"}); !errors.Is(err, ErrMismatch) {
		t.Fatalf("fingerprint mismatch not reported: %v", err)
	}
	if _, err := OpenExpect(data, Header{KeyID: "k2"}); !errors.Is(err, ErrMismatch) {
		t.Fatalf("key mismatch not reported: %v", err)
	}
}

func TestTruncationAndCorruptionAreDetected(t *testing.T) {
	data := Seal(Header{Kind: "x", Fingerprint: "f", KeyID: "k"}, make([]byte, 1000))
	for n := 0; n < len(data); n += 37 {
		if _, _, err := Open(data[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncation to %d bytes not detected: %v", n, err)
		}
	}
	for i := 0; i < len(data); i += 13 {
		c := append([]byte(nil), data...)
		c[i] ^= 0x40
		if _, _, err := Open(c); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("bit flip at %d not detected: %v", i, err)
		}
	}
}

func TestWriteAtomicLeavesNothingOnFailure(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := WriteFile(path, Header{Kind: "a"}, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("disk full")
	err := WriteAtomic(path, 0o600, func(w io.Writer) error {
		w.Write([]byte("partial"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("write error not returned: %v", err)
	}
	if _, p, err := Open(mustRead(t, path)); err != nil || string(p) != "one" {
		t.Fatalf("old content lost: %v %q", err, p)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func FuzzOpen(f *testing.F) {
	f.Add(Seal(Header{Kind: "query", Fingerprint: "abc", KeyID: "k"}, []byte{1, 2, 3}))
	f.Add([]byte("ENCMATCH"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		h, p, err := Open(data)
		if err != nil {
			return
		}
		if again := Seal(h, p); string(again) != string(data) {
			t.Fatalf("accepted frame does not re-seal to itself")
		}
	})
}

func TestRemoveTemps(t *testing.T) {
	dir := t.TempDir()
	tmp := filepath.Join(dir, ".group-000000.ct.tmp-123")
	os.WriteFile(tmp, []byte("x"), 0o600)
	RemoveTemps(dir)
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatal("temp file survived")
	}
}

func TestStreamRoundTripAndCorruption(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "g")
	payload := make([]byte, 3<<20)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	h := Header{Kind: "group", Fingerprint: "f", KeyID: "k"}
	err := WriteFileStream(path, h, int64(len(payload)), 0o644, func(w io.Writer) error {
		_, err := w.Write(payload)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// A streamed file is also a valid in-memory frame.
	if _, p, err := Open(mustRead(t, path)); err != nil || len(p) != len(payload) {
		t.Fatalf("streamed frame does not open: %v", err)
	}
	read := func() ([]byte, error) {
		var got []byte
		err := ReadFileStream(path, h, func(r io.Reader, n int64) error {
			var err error
			got, err = io.ReadAll(r)
			return err
		})
		return got, err
	}
	if got, err := read(); err != nil || string(got) != string(payload) {
		t.Fatalf("stream round trip: %v", err)
	}
	data := mustRead(t, path)
	data[len(data)/2] ^= 1
	os.WriteFile(path, data, 0o644)
	if _, err := read(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corruption not detected: %v", err)
	}
	os.WriteFile(path, data[:len(data)-100], 0o644)
	if _, err := read(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("truncation not detected: %v", err)
	}
}

// TestReadFileStreamVerifiesWhatDecodeSkips: ReadFileStream decodes while
// it hashes, so the checksum must cover the bytes decode never read, a
// corrupt file must read as ErrCorrupt even when decode failed on it
// first, and decode's own error must come back on an intact file.
func TestReadFileStreamVerifiesWhatDecodeSkips(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g")
	payload := make([]byte, 9<<20+3) // more than one read-ahead chunk
	for i := range payload {
		payload[i] = byte(i * 11)
	}
	h := Header{Kind: "group", Fingerprint: "f", KeyID: "k"}
	if err := WriteFileStream(path, h, int64(len(payload)), 0o644, func(w io.Writer) error {
		_, err := w.Write(payload)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	errDecode := errors.New("decode refused")
	head := func(r io.Reader, n int64) error { // reads the first MiB only
		_, err := io.ReadFull(r, make([]byte, 1<<20))
		return err
	}
	failing := func(r io.Reader, n int64) error { return errDecode }
	if err := ReadFileStream(path, h, head); err != nil {
		t.Fatalf("an intact file read in part: %v", err)
	}
	if err := ReadFileStream(path, h, failing); !errors.Is(err, errDecode) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("decode's error on an intact file: %v", err)
	}
	data := mustRead(t, path)
	data[len(data)-1000] ^= 0x40 // past what head reads
	os.WriteFile(path, data, 0o644)
	for name, decode := range map[string]func(io.Reader, int64) error{"partial": head, "failing": failing} {
		if err := ReadFileStream(path, h, decode); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s decode of a corrupt file: %v", name, err)
		}
	}
}

// TestWriteFileAt: a payload written out of order in pieces is the same
// frame as one written in a stream; a fill that misses a byte, writes
// outside the payload or fails leaves no file.
func TestWriteFileAt(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "db")
	payload := make([]byte, 1<<20+5)
	for i := range payload {
		payload[i] = byte(i*13 + 1)
	}
	h := Header{Kind: "db", Fingerprint: "f", KeyID: "k"}
	const piece = 4096
	backwards := func(skip int64) func(w io.WriterAt) error {
		return func(w io.WriterAt) error {
			for off := int64(len(payload)) / piece * piece; off >= 0; off -= piece {
				end := min(off+piece, int64(len(payload)))
				if off == skip {
					continue
				}
				if _, err := w.WriteAt(payload[off:end], off); err != nil {
					return err
				}
			}
			return nil
		}
	}
	if err := WriteFileAt(path, h, int64(len(payload)), 0o644, backwards(-1)); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadFile(path, h); err != nil || string(got) != string(payload) {
		t.Fatalf("out-of-order round trip: %v", err)
	}
	other := filepath.Join(dir, "other")
	for name, fill := range map[string]func(w io.WriterAt) error{
		"a missing piece": backwards(piece),
		"a write past the end": func(w io.WriterAt) error {
			_, err := w.WriteAt([]byte{1, 2}, int64(len(payload))-1)
			return err
		},
		"a failing fill": func(io.WriterAt) error { return errors.New("disk full") },
	} {
		if err := WriteFileAt(other, h, int64(len(payload)), 0o644, fill); err == nil {
			t.Errorf("%s: no error", name)
		}
		if _, err := os.Stat(other); !os.IsNotExist(err) {
			t.Errorf("%s: left a file (%v)", name, err)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".*")); len(m) != 0 {
		t.Fatalf("temporary files left: %v", m)
	}
}

// TestChunks: chunks written by WriteChunks come back in order; a wrong
// count or a cut chunk is ErrCorrupt, never a short read.
func TestChunks(t *testing.T) {
	var b bytes.Buffer
	objs := []binaryBytes{[]byte("one"), []byte(""), []byte("three")}
	if err := WriteChunks(&b, objs); err != nil {
		t.Fatal(err)
	}
	got, err := Chunks(b.Bytes(), 3, "test")
	if err != nil || len(got) != 3 || string(got[0]) != "one" || len(got[1]) != 0 || string(got[2]) != "three" {
		t.Fatalf("chunks %q, %v", got, err)
	}
	if _, err := Chunks(b.Bytes(), 2, "test"); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("3 chunks read as 2: %v", err)
	}
	if _, err := Chunks(b.Bytes()[:b.Len()-1], 0, "test"); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("a cut chunk: %v", err)
	}
}

// binaryBytes is a byte string as an encoding.BinaryMarshaler.
type binaryBytes []byte

func (b binaryBytes) MarshalBinary() ([]byte, error) { return b, nil }

// TestStoredChecksum: the checksum a file ends with, which differs between
// payloads, read without moving the payload's stream; a foreign kind and a
// truncated file are refused when the file opens.
func TestStoredChecksum(t *testing.T) {
	dir := t.TempDir()
	h := Header{Kind: "x", Fingerprint: "f", KeyID: "k"}
	sums := map[[32]byte]bool{}
	for i, payload := range []string{"one payload", "another payload"} {
		path := filepath.Join(dir, "f"+string(rune('0'+i)))
		if err := WriteFile(path, h, []byte(payload), 0o644); err != nil {
			t.Fatal(err)
		}
		p, err := OpenPayload(path, h)
		if err != nil {
			t.Fatal(err)
		}
		sum, err := p.StoredChecksum()
		if err != nil {
			t.Fatal(err)
		}
		data := Seal(h, []byte(payload))
		if !bytes.Equal(sum[:], data[len(data)-32:]) {
			t.Fatalf("payload %q: StoredChecksum %x, the frame ends with %x", payload, sum, data[len(data)-32:])
		}
		if rest, err := io.ReadAll(p); err != nil || string(rest) != payload {
			t.Fatalf("the payload after StoredChecksum: %q, %v", rest, err)
		}
		p.Close()
		sums[sum] = true
		if _, err := OpenPayload(path, Header{Kind: "y"}); !errors.Is(err, ErrMismatch) {
			t.Fatalf("another kind: %v", err)
		}
		if err := os.Truncate(path, int64(len(data)-1)); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenPayload(path, h); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("a truncated file: %v", err)
		}
	}
	if len(sums) != 2 {
		t.Fatal("two payloads gave one checksum")
	}
}

// TestVerifyingPayload: a payload read whole, in part or not at all
// verifies; one whose payload or checksum changed after writing is
// ErrCorrupt at Verify (its bytes still read); a foreign kind and a
// truncated file are refused when the file opens.
func TestVerifyingPayload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m")
	h := Header{Kind: "matrix", Fingerprint: "f", KeyID: "k"}
	payload := make([]byte, 5<<20+3) // past the reader's 4 MiB buffer
	for i := range payload {
		payload[i] = byte(i * 13)
	}
	if err := WriteFile(path, h, payload, 0o644); err != nil {
		t.Fatal(err)
	}
	frame := mustRead(t, path)
	check := func(what string, data []byte, readBytes int, want error) {
		t.Helper()
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		v, err := OpenVerifyingPayload(path, h)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		defer v.Close()
		got := make([]byte, readBytes)
		if _, err := io.ReadFull(v, got); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if want == nil && !bytes.Equal(got, payload[:readBytes]) {
			t.Fatalf("%s: the payload read differs", what)
		}
		if err := v.Verify(); !errors.Is(err, want) || (want == nil) != (err == nil) {
			t.Fatalf("%s: Verify %v, want %v", what, err, want)
		}
	}
	for _, n := range []int{len(payload), 1 << 20, 0} {
		check(fmt.Sprintf("intact, %d bytes read", n), frame, n, nil)
	}
	off := len(frame) - 32 - len(payload)
	for what, at := range map[string]int{"payload": off + len(payload)/2, "checksum": len(frame) - 1} {
		bad := bytes.Clone(frame)
		bad[at] ^= 1
		check("a changed "+what, bad, len(payload), ErrCorrupt)
	}
	if err := os.WriteFile(path, frame, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenVerifyingPayload(path, Header{Kind: "other"}); !errors.Is(err, ErrMismatch) {
		t.Fatalf("another kind: %v", err)
	}
	if err := os.WriteFile(path, frame[:len(frame)-1], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenVerifyingPayload(path, h); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a truncated file: %v", err)
	}
}
