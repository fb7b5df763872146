package parallel

import (
	"errors"
	"sync/atomic"
	"testing"
)

func TestForRunsEverythingAndReportsAnError(t *testing.T) {
	var n atomic.Int64
	if err := For(100, func(i int) error { n.Add(int64(i)); return nil }); err != nil || n.Load() != 4950 {
		t.Fatalf("sum %d err %v", n.Load(), err)
	}
	boom := errors.New("boom")
	if err := For(10, func(i int) error {
		if i == 7 {
			return boom
		}
		return nil
	}); !errors.Is(err, boom) {
		t.Fatalf("error lost: %v", err)
	}
	if err := For(0, func(int) error { return boom }); err != nil {
		t.Fatal("ran work for n=0")
	}
}
