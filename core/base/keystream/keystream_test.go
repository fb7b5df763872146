package keystream

import (
	"bytes"
	"crypto/aes"
	"encoding/binary"
	"testing"
)

// TestStreamIsAESOfCounterBlocks: the stream is AES-256 of iv, iv + 1,
// iv + 2, ... (the low 32 bits counting), whatever the buffer held before
// and however the reads are cut.
func TestStreamIsAESOfCounterBlocks(t *testing.T) {
	key := bytes.Repeat([]byte{0x5a}, 32)
	block, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	var iv [aes.BlockSize]byte
	binary.BigEndian.PutUint64(iv[:8], 12345)
	want := make([]byte, 40*aes.BlockSize)
	ctr := iv
	for b := 0; b < 40; b++ {
		block.Encrypt(want[b*aes.BlockSize:], ctr[:])
		binary.BigEndian.PutUint32(ctr[12:], binary.BigEndian.Uint32(ctr[12:])+1)
	}
	s := New(block, iv)
	got := bytes.Repeat([]byte{0xff}, len(want)) // stale content must not show through
	for lo, cut := 0, 1; lo < len(got); lo, cut = lo+cut, cut*3 {
		hi := min(lo+cut, len(got))
		if n, err := s.Read(got[lo:hi]); n != hi-lo || err != nil {
			t.Fatalf("Read: %d, %v", n, err)
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the stream is not AES-256 of the counter blocks")
	}
}
