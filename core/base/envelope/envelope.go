// Package envelope wraps every binary artefact of encmatch (keys, gallery
// groups, queries, results) in a self-checking frame, and writes files
// atomically.
//
// Frame layout (little endian):
//
//	magic "ENCMATCH" | u16 version | u16 len(kind) kind | u16 len(fingerprint) fingerprint |
//	u16 len(keyID) keyID | u64 len(payload) | payload | 32-byte SHA-256 of everything before it
//
// Open checks the magic, the lengths and the checksum before anything is
// decoded, so a truncated or corrupted file is reported as such rather than
// handed to a decoder.
package envelope

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"sync"

	"encmatch/core/base/errs"
)

const (
	magic   = "ENCMATCH"
	version = 1
	// MaxPayload bounds a payload (64 GiB) so that a corrupt length is
	// rejected instead of allocated.
	MaxPayload = 1 << 36
)

// ErrCorrupt marks truncated, corrupted or foreign data.
var ErrCorrupt = errs.ErrCorrupt

// ErrMismatch marks data made for another kind, parameter set or key set.
var ErrMismatch = errs.ErrMismatch

// Header identifies a payload.
type Header struct {
	Kind        string // e.g. "query", "result", "galois-key"
	Fingerprint string // parameter set fingerprint
	KeyID       string // key set identifier
}

// Seal frames a payload.
func Seal(h Header, payload []byte) []byte {
	var b bytes.Buffer
	b.Grow(len(payload) + 128)
	b.WriteString(magic)
	_ = binary.Write(&b, binary.LittleEndian, uint16(version))
	for _, s := range []string{h.Kind, h.Fingerprint, h.KeyID} {
		_ = binary.Write(&b, binary.LittleEndian, uint16(len(s)))
		b.WriteString(s)
	}
	_ = binary.Write(&b, binary.LittleEndian, uint64(len(payload)))
	b.Write(payload)
	sum := sha256.Sum256(b.Bytes())
	b.Write(sum[:])
	return b.Bytes()
}

// Open checks a frame and returns its header and payload.
func Open(data []byte) (Header, []byte, error) {
	h, off, n, err := parseHeader(data)
	if err != nil {
		return Header{}, nil, err
	}
	if int64(len(data)) != off+n+sha256.Size {
		return Header{}, nil, fmt.Errorf("%w: %d bytes present, header announces %d", ErrCorrupt, len(data), off+n+sha256.Size)
	}
	body := len(data) - sha256.Size
	sum := sha256.Sum256(data[:body])
	if !bytes.Equal(sum[:], data[body:]) {
		return Header{}, nil, fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	}
	return h, data[off : off+n], nil
}

// Expect checks that a header has the wanted kind, fingerprint and key id
// (an empty wanted field is not checked).
func (h Header) Expect(want Header) error {
	if want.Kind != "" && h.Kind != want.Kind {
		return fmt.Errorf("%w: expected a %s, got a %s", ErrMismatch, want.Kind, h.Kind)
	}
	if want.Fingerprint != "" && h.Fingerprint != want.Fingerprint {
		return fmt.Errorf("%w: %s was made with other parameters (fingerprint %s, expected %s)", ErrMismatch, h.Kind, h.Fingerprint, want.Fingerprint)
	}
	if want.KeyID != "" && h.KeyID != want.KeyID {
		return fmt.Errorf("%w: %s belongs to another key set (key id %s, expected %s)", ErrMismatch, h.Kind, h.KeyID, want.KeyID)
	}
	return nil
}

// OpenExpect opens a frame and checks its header.
func OpenExpect(data []byte, want Header) ([]byte, error) {
	h, p, err := Open(data)
	if err != nil {
		return nil, err
	}
	if err := h.Expect(want); err != nil {
		return nil, err
	}
	return p, nil
}

// ReadFile reads and opens a framed file, naming the file in errors.
func ReadFile(path string, want Header) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p, err := OpenExpect(data, want)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// ReadFileSized reads and opens a framed file whose payload must have
// exactly payloadLen bytes (a key, whose size the parameters fix). The
// header and the file's size are checked before the file is read, so a file
// of the wrong size is refused without reading (or allocating) it.
func ReadFileSized(path string, want Header, payloadLen int64) ([]byte, error) {
	f, off, n, err := openSized(path, want, payloadLen)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	data := make([]byte, off+n+sha256.Size)
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", path, ErrCorrupt, err)
	}
	p, err := OpenExpect(data, want)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// WriteFile frames a payload and writes it atomically to path.
func WriteFile(path string, h Header, payload []byte, perm os.FileMode) error {
	return WriteAtomic(path, perm, func(w io.Writer) error {
		_, err := w.Write(Seal(h, payload))
		return err
	})
}

// WriteAtomic writes a file through a temporary file in the same directory:
// write, fsync, rename, fsync the directory. A crash leaves either the old
// file or the new one, never a partial one under path.
func WriteAtomic(path string, perm os.FileMode, write func(io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if err = write(f); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	return SyncDir(dir)
}

// SyncDir fsyncs a directory so that renames in it are durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// RemoveTemps deletes temporary files that an interrupted WriteAtomic left
// in dir.
func RemoveTemps(dir string) {
	matches, _ := filepath.Glob(filepath.Join(dir, ".*.tmp-*"))
	for _, m := range matches {
		os.Remove(m)
	}
}

// hashingWriter counts and hashes what passes through it.
type hashingWriter struct {
	w interface{ Write([]byte) (int, error) }
	h interface{ Write([]byte) (int, error) }
	n int64
}

func (hw *hashingWriter) Write(p []byte) (int, error) {
	n, err := hw.w.Write(p)
	hw.h.Write(p[:n])
	hw.n += int64(n)
	return n, err
}

// WriteFileStream writes a framed file of payloadLen bytes atomically,
// streaming the payload from write (for artefacts too large to hold twice in
// memory). It fails if write produces another number of bytes.
func WriteFileStream(path string, h Header, payloadLen int64, perm os.FileMode, write func(io.Writer) error) error {
	return WriteAtomic(path, perm, func(f io.Writer) error {
		hasher := sha256.New()
		bw := bufio.NewWriterSize(f, 1<<20)
		hw := &hashingWriter{w: bw, h: hasher}
		head := Seal(h, nil)
		head = head[:len(head)-sha256.Size-8] // drop the empty payload's length and checksum
		if _, err := hw.Write(head); err != nil {
			return err
		}
		if err := binary.Write(hw, binary.LittleEndian, uint64(payloadLen)); err != nil {
			return err
		}
		start := hw.n
		if err := write(hw); err != nil {
			return err
		}
		if got := hw.n - start; got != payloadLen {
			return fmt.Errorf("internal error: wrote %d payload bytes, announced %d", got, payloadLen)
		}
		if _, err := bw.Write(hasher.Sum(nil)); err != nil {
			return err
		}
		return bw.Flush()
	})
}

// WriteFileAt writes a framed file of payloadLen bytes atomically whose
// payload fill writes out of order, at offsets from the payload's start
// (for artefacts produced a band of columns at a time); the checksum is
// then computed in a reading pass. fill must write every payload byte
// once: writes outside the payload, or a total other than payloadLen, fail.
func WriteFileAt(path string, h Header, payloadLen int64, perm os.FileMode, fill func(w io.WriterAt) error) error {
	if payloadLen < 0 || payloadLen > MaxPayload {
		return fmt.Errorf("%w: payload of %d bytes", errs.ErrInvalid, payloadLen)
	}
	return WriteAtomic(path, perm, func(w io.Writer) error {
		f, ok := w.(*os.File)
		if !ok {
			return fmt.Errorf("internal error: WriteAtomic gave a %T", w)
		}
		head := Seal(h, nil)
		head = binary.LittleEndian.AppendUint64(head[:len(head)-sha256.Size-8], uint64(payloadLen))
		if _, err := f.WriteAt(head, 0); err != nil {
			return err
		}
		pw := &payloadWriter{f: f, off: int64(len(head)), n: payloadLen}
		if err := fill(pw); err != nil {
			return err
		}
		if pw.written != payloadLen {
			return fmt.Errorf("internal error: wrote %d payload bytes, announced %d", pw.written, payloadLen)
		}
		hasher := sha256.New()
		if _, err := io.Copy(hasher, bufio.NewReaderSize(io.NewSectionReader(f, 0, pw.off+payloadLen), 1<<20)); err != nil {
			return err
		}
		_, err := f.WriteAt(hasher.Sum(nil), pw.off+payloadLen)
		return err
	})
}

// payloadWriter writes at offsets within a payload of n bytes that starts
// at off in f, and counts the bytes written.
type payloadWriter struct {
	f          *os.File
	off, n     int64
	written    int64
	sync.Mutex // fill may write from several goroutines
}

func (w *payloadWriter) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > w.n {
		return 0, fmt.Errorf("internal error: a write of %d bytes at %d outside a payload of %d", len(p), off, w.n)
	}
	n, err := w.f.WriteAt(p, w.off+off)
	w.Lock()
	w.written += int64(n)
	w.Unlock()
	return n, err
}

// ReadFileStream hands a framed file's payload (after its header and size
// are checked) to decode in one pass, hashing it on the way on a goroutine
// of its own (OpenVerifyingPayload), and checks the checksum over the
// whole payload once decode returns, whatever decode read of it. It
// returns nil only if the file is intact and decode succeeded; a corrupt
// file is ErrCorrupt even where decode failed on it first. decode sees
// the bytes before they are verified, so a caller keeps what decode built
// only when ReadFileStream returns nil.
func ReadFileStream(path string, want Header, decode func(r io.Reader, n int64) error) error {
	v, err := OpenVerifyingPayload(path, want)
	if err != nil {
		return err
	}
	defer v.Close()
	derr := decode(v, v.Len)
	if err := v.Verify(); err != nil {
		return err
	}
	if derr != nil {
		return fmt.Errorf("%s: %w", path, derr)
	}
	return nil
}

// PayloadStream is the payload of a framed file, read in one pass without
// the whole-file checksum: for formats whose payload carries its own
// per-record checksums.
type PayloadStream struct {
	io.Reader
	Len  int64 // payload bytes
	file *os.File
	off  int64 // the payload's offset in the file
}

// Close closes the file.
func (p *PayloadStream) Close() error { return p.file.Close() }

// StoredChecksum returns the SHA-256 the frame ends with, read without the
// payload and without moving the stream: a name for the file's contents,
// which the checksum check binds to them whenever the payload is read.
func (p *PayloadStream) StoredChecksum() ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	if _, err := p.file.ReadAt(sum[:], p.off+p.Len); err != nil {
		return sum, fmt.Errorf("%w: reading the checksum: %v", ErrCorrupt, err)
	}
	return sum, nil
}

// OpenPayload checks a framed file's header and size and returns a reader
// of its payload.
func OpenPayload(path string, want Header) (*PayloadStream, error) {
	f, off, n, err := openFramed(path, want)
	if err != nil {
		return nil, err
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	return &PayloadStream{Reader: bufio.NewReaderSize(io.LimitReader(f, n), 4<<20), Len: n, file: f, off: off}, nil
}

// VerifyingPayload is the payload of a framed file read in one pass that
// also hashes what it reads: Verify, once the reader is done, checks the
// frame's checksum. For payloads too large to read twice (a server's
// encrypted database): the reader must validate what it decodes as it
// goes (untrusted bytes) and must not act on the result, nor write it
// anywhere, before Verify returns nil. The file is read and hashed on a
// goroutine of its own, up to 64 MiB ahead of the reader, so
// that a reader that computes between its reads does not wait for the
// disk or the hash; Close stops it.
type VerifyingPayload struct {
	PayloadStream
	hasher hash.Hash // the frame's bytes read so far
	ahead  *readAhead
}

// How far a VerifyingPayload reads ahead of its reader: 16 chunks of 4
// MiB.
const (
	readAheadChunk = 4 << 20
	readAheadDepth = 16
)

// OpenVerifyingPayload checks a framed file's header and size and returns
// a hashing reader of its payload.
func OpenVerifyingPayload(path string, want Header) (*VerifyingPayload, error) {
	f, off, n, err := openFramed(path, want)
	if err != nil {
		return nil, err
	}
	hasher := sha256.New()
	if _, err := io.Copy(hasher, io.NewSectionReader(f, 0, off)); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w: %v", path, ErrCorrupt, err)
	}
	ahead := newReadAhead(io.NewSectionReader(f, off, n), readAheadChunk, readAheadDepth, func(b []byte) { hasher.Write(b) })
	return &VerifyingPayload{PayloadStream: PayloadStream{Reader: ahead, Len: n, file: f, off: off},
		hasher: hasher, ahead: ahead}, nil
}

// Verify hashes what the reader left of the payload and compares the
// frame's checksum: ErrCorrupt if the file is not what was written. It
// does not close the file.
func (v *VerifyingPayload) Verify() error {
	if _, err := io.Copy(io.Discard, v.ahead); err != nil {
		return fmt.Errorf("%s: %w: %v", v.file.Name(), ErrCorrupt, err)
	}
	sum, err := v.StoredChecksum()
	if err != nil {
		return fmt.Errorf("%s: %w", v.file.Name(), err)
	}
	if !bytes.Equal(sum[:], v.hasher.Sum(nil)) {
		return fmt.Errorf("%s: %w: checksum mismatch", v.file.Name(), ErrCorrupt)
	}
	return nil
}

// Close stops the reading goroutine and closes the file.
func (v *VerifyingPayload) Close() error {
	v.ahead.Close()
	return v.file.Close()
}

// CheckFileSized checks a framed file's header and size as ReadFileSized
// does, without reading its payload (the checksum is checked when it is
// read).
func CheckFileSized(path string, want Header, payloadLen int64) error {
	f, _, _, err := openSized(path, want, payloadLen)
	if err != nil {
		return err
	}
	return f.Close()
}

// openSized is openFramed for a payload of exactly payloadLen bytes.
func openSized(path string, want Header, payloadLen int64) (*os.File, int64, int64, error) {
	f, off, n, err := openFramed(path, want)
	if err != nil {
		return nil, 0, 0, err
	}
	if n != payloadLen {
		f.Close()
		return nil, 0, 0, fmt.Errorf("%s: %w: %d payload bytes, a %s of these parameters has %d", path, ErrCorrupt, n, want.Kind, payloadLen)
	}
	return f, off, n, nil
}

// openFramed opens a framed file and checks its header and total size.
func openFramed(path string, want Header) (*os.File, int64, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, 0, err
	}
	fail := func(err error) (*os.File, int64, int64, error) {
		f.Close()
		return nil, 0, 0, fmt.Errorf("%s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		return fail(err)
	}
	head := make([]byte, min(st.Size(), 1<<16))
	if _, err := io.ReadFull(f, head); err != nil {
		return fail(fmt.Errorf("%w: %v", ErrCorrupt, err))
	}
	h, off, n, err := parseHeader(head)
	if err != nil {
		return fail(err)
	}
	if err := h.Expect(want); err != nil {
		return fail(err)
	}
	if st.Size() != off+n+sha256.Size {
		return fail(fmt.Errorf("%w: file has %d bytes, header announces %d", ErrCorrupt, st.Size(), off+n+sha256.Size))
	}
	return f, off, n, nil
}

// parseHeader reads the header fields of a frame and returns the payload's
// offset and length.
func parseHeader(data []byte) (h Header, off, n int64, err error) {
	if len(data) < len(magic)+2 || string(data[:len(magic)]) != magic {
		return h, 0, 0, fmt.Errorf("%w: not an encmatch artefact (bad magic)", ErrCorrupt)
	}
	r := data[len(magic):]
	if v := binary.LittleEndian.Uint16(r); v != version {
		return h, 0, 0, fmt.Errorf("%w: unsupported format version %d", ErrCorrupt, v)
	}
	r = r[2:]
	var fields [3]string
	for i := range fields {
		if len(r) < 2 {
			return h, 0, 0, fmt.Errorf("%w: truncated header", ErrCorrupt)
		}
		k := int(binary.LittleEndian.Uint16(r))
		r = r[2:]
		if len(r) < k {
			return h, 0, 0, fmt.Errorf("%w: truncated header", ErrCorrupt)
		}
		fields[i] = string(r[:k])
		r = r[k:]
	}
	if len(r) < 8 {
		return h, 0, 0, fmt.Errorf("%w: truncated header", ErrCorrupt)
	}
	n = int64(binary.LittleEndian.Uint64(r))
	if n < 0 || n > MaxPayload {
		return h, 0, 0, fmt.Errorf("%w: payload length %d out of range", ErrCorrupt, n)
	}
	off = int64(len(data) - len(r) + 8)
	return Header{Kind: fields[0], Fingerprint: fields[1], KeyID: fields[2]}, off, n, nil
}

// Unmarshal decodes a Lattigo object from bytes that passed the frame checks,
// turning a decoder panic into an ErrCorrupt error that names what. When obj
// reports its size (BinarySize, as a preallocated Lattigo object does), data
// of another size is refused before decoding.
//
// Unmarshal does not check the length fields inside data, and Lattigo's
// decoders allocate whatever they ask for: untrusted keys and ciphertexts
// must go through package codec's decoders instead, which do.
func Unmarshal(obj encoding.BinaryUnmarshaler, data []byte, what string) (err error) {
	if sized, ok := obj.(interface{ BinarySize() int }); ok && sized.BinarySize() != len(data) {
		return fmt.Errorf("%w: cannot decode %s: %d bytes, expected %d", ErrCorrupt, what, len(data), sized.BinarySize())
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: cannot decode %s: %v", ErrCorrupt, what, r)
		}
	}()
	if err := obj.UnmarshalBinary(data); err != nil {
		return fmt.Errorf("%w: cannot decode %s: %v", ErrCorrupt, what, err)
	}
	return nil
}

// AppendChunk appends a length-prefixed chunk.
func AppendChunk(dst, chunk []byte) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, uint64(len(chunk)))
	return append(dst, chunk...)
}

// NextChunk splits the first length-prefixed chunk off data.
func NextChunk(data []byte) (chunk, rest []byte, err error) {
	if len(data) < 8 {
		return nil, nil, fmt.Errorf("%w: truncated chunk header", ErrCorrupt)
	}
	n := binary.LittleEndian.Uint64(data)
	if n > uint64(len(data)-8) {
		return nil, nil, fmt.Errorf("%w: chunk of %d bytes, %d present", ErrCorrupt, n, len(data)-8)
	}
	return data[8 : 8+n], data[8+n:], nil
}

// Chunks splits a payload of length-prefixed chunks (AppendChunk); want
// > 0 fixes their number (ErrCorrupt otherwise). what names the payload in
// errors.
func Chunks(payload []byte, want int, what string) ([][]byte, error) {
	var out [][]byte
	for len(payload) > 0 {
		c, rest, err := NextChunk(payload)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out, payload = append(out, c), rest
	}
	if want > 0 && len(out) != want {
		return nil, fmt.Errorf("%w: %s: %d parts, expected %d", errs.ErrCorrupt, what, len(out), want)
	}
	return out, nil
}

// WriteChunks writes each object's binary form as a length-prefixed chunk
// (read back by Chunks).
func WriteChunks[T encoding.BinaryMarshaler](w io.Writer, objs []T) error {
	for _, o := range objs {
		b, err := o.MarshalBinary()
		if err != nil {
			return err
		}
		if _, err := w.Write(AppendChunk(nil, b)); err != nil {
			return err
		}
	}
	return nil
}

// WriteJSON writes v as indented JSON, atomically.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return WriteAtomic(path, 0o644, func(w io.Writer) error {
		_, err := w.Write(append(b, '\n'))
		return err
	})
}

// MaxJSON bounds the size of a JSON file that ReadJSON reads (16 MiB: a
// manifest of a gallery of 10^8 entries at the default parameters is about
// 0.7 MB).
const MaxJSON = 16 << 20

// ReadJSON reads a JSON file of at most MaxJSON bytes into v. A missing file
// is reported as "<what> <path> not found" wrapping fs.ErrNotExist, bad or
// oversized JSON as ErrCorrupt.
func ReadJSON(path, what string, v any) error {
	f, err := os.Open(path)
	if err != nil {
		if os.IsNotExist(err) {
			return fmt.Errorf("%s %s not found: %w", what, path, os.ErrNotExist)
		}
		return err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxJSON+1))
	if err != nil {
		return err
	}
	if len(b) > MaxJSON {
		return fmt.Errorf("%w: %s: %s larger than %d bytes", ErrCorrupt, path, what, MaxJSON)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
	}
	return nil
}
