package envelope

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// TestReadAhead: the stream read through a read-ahead of small chunks, in
// reads of every size, is the source, and onRead saw exactly the source in
// order; a source that fails mid-way yields its bytes then its error (not
// io.EOF); Close returns while the goroutine waits for a free buffer and
// while it waits on a slow source.
func TestReadAhead(t *testing.T) {
	src := make([]byte, 1000)
	for i := range src {
		src[i] = byte(i*7 + 3)
	}
	for _, tc := range []struct{ chunk, depth, read int }{{7, 1, 1}, {7, 3, 5}, {64, 2, 1000}, {1000, 1, 999}, {3, 4, 4096}} {
		var seen bytes.Buffer
		r := newReadAhead(iotest.OneByteReader(bytes.NewReader(src)), tc.chunk, tc.depth, func(b []byte) { seen.Write(b) })
		var got bytes.Buffer
		buf := make([]byte, tc.read)
		for {
			n, err := r.Read(buf)
			got.Write(buf[:n])
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		r.Close()
		if !bytes.Equal(got.Bytes(), src) || !bytes.Equal(seen.Bytes(), src) {
			t.Fatalf("chunk %d depth %d reads of %d: %d bytes read, %d seen, want the %d of the source", tc.chunk, tc.depth, tc.read, got.Len(), seen.Len(), len(src))
		}
	}

	boom := errors.New("disk error")
	r := newReadAhead(io.MultiReader(bytes.NewReader(src[:100]), iotest.ErrReader(boom)), 16, 2, func([]byte) {})
	got, err := io.ReadAll(r)
	r.Close()
	if !errors.Is(err, boom) || !bytes.Equal(got, src[:100]) {
		t.Fatalf("a failing source: %d bytes, %v; want 100 and %v", len(got), err, boom)
	}

	// The goroutine fills its buffers and waits: Close must not hang.
	r = newReadAhead(bytes.NewReader(src), 10, 2, func([]byte) {})
	if _, err := io.ReadFull(r, make([]byte, 5)); err != nil {
		t.Fatal(err)
	}
	r.Close()
	// A source that blocks until released: Close waits for the read in
	// progress, then returns.
	pr, pw := io.Pipe()
	r = newReadAhead(pr, 10, 2, func([]byte) {})
	go func() { pw.Write(src[:10]); pw.Close() }()
	r.Close()
}
