package envelope

import (
	"errors"
	"io"
)

// readAhead is an io.Reader over src that reads on its own goroutine, up
// to depth chunks of chunkSize bytes ahead of its consumer, and passes
// every chunk to onRead (a hash) in order before handing it on: the disk
// and the hash work while the consumer computes, where a reader in the
// consumer's goroutine made the consumer wait for both. Close stops the
// goroutine; Read must not be called after it.
type readAhead struct {
	full chan chunk  // chunks read, in order; the last one carries the error (io.EOF at the end)
	free chan []byte // buffers the consumer has used up
	stop chan struct{}
	done chan struct{} // closed when the goroutine has returned

	cur []byte // the unread rest of the current chunk
	buf []byte // the current chunk's buffer
	err error  // the error that ended the stream, once the consumer reached it
}

type chunk struct {
	b   []byte
	err error
}

// newReadAhead starts reading src (depth >= 1 buffers of chunkSize bytes,
// allocated as the reading gets ahead).
func newReadAhead(src io.Reader, chunkSize, depth int, onRead func([]byte)) *readAhead {
	r := &readAhead{
		full: make(chan chunk, depth+1),
		free: make(chan []byte, depth),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	go r.produce(src, chunkSize, depth, onRead)
	return r
}

func (r *readAhead) produce(src io.Reader, chunkSize, depth int, onRead func([]byte)) {
	defer close(r.done)
	send := func(c chunk) bool {
		select {
		case r.full <- c:
			return true
		case <-r.stop:
			return false
		}
	}
	allocated := 0
	for {
		var b []byte
		select {
		case b = <-r.free:
		case <-r.stop:
			return
		default:
			if allocated < depth {
				b, allocated = make([]byte, chunkSize), allocated+1
				break
			}
			select {
			case b = <-r.free:
			case <-r.stop:
				return
			}
		}
		n, err := io.ReadFull(src, b)
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = io.EOF
		}
		if n > 0 {
			onRead(b[:n])
			if !send(chunk{b: b[:n]}) {
				return
			}
		}
		if err != nil {
			send(chunk{err: err})
			return
		}
	}
}

// Read copies the next bytes of the stream into p.
func (r *readAhead) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(r.cur) == 0 {
			if r.err != nil {
				break
			}
			if r.buf != nil {
				r.free <- r.buf[:cap(r.buf)] // never blocks: at most depth buffers exist
				r.buf = nil
			}
			c := <-r.full
			if c.err != nil {
				r.err = c.err
				continue
			}
			r.cur, r.buf = c.b, c.b
		}
		k := copy(p[n:], r.cur)
		r.cur, n = r.cur[k:], n+k
	}
	if n > 0 {
		return n, nil
	}
	return 0, r.err
}

// Close stops the reading goroutine and waits for it.
func (r *readAhead) Close() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	<-r.done
}
