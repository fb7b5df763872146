// Package keycache keeps evaluation keys on disk and a bounded number of
// them in memory: Set is an rlwe.EvaluationKeySet whose Galois keys are
// loaded on first use and evicted once the keys held exceed a byte budget.
// The relinearisation key stays resident.
//
// It exists for the iris bootstrapping ring (N = 2^16, log QP 1,750), whose
// 39 Galois keys take 16 GiB at the default-dense preset (5.5 GiB at the
// default preset, which a 6 GiB budget holds whole): more than a 24 GB
// server can hold beside the bootstrapping's DFT matrices and a database. A bootstrap cycles through
// 38 of them (its CoeffsToSlots and SlotsToCoeffs levels, in the same order
// every time), so the eviction policy is the one for loops longer than the
// cache: the most recently used key goes first (the one just loaded
// excepted). Least recently used first would miss on every use of such a
// loop; this policy keeps a fixed part of it resident (about budget / key
// size - 1 hits per pass).
package keycache

import (
	"container/list"
	"fmt"
	"slices"
	"sync"
	"time"

	"encmatch/core/base/errs"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
)

// Loader reads the Galois key of one element (from a file, typically).
type Loader func(galEl uint64) (*rlwe.GaloisKey, error)

// Stats reports a Set's activity.
type Stats struct {
	Loads, Hits int           // keys read from the loader; requests served from memory
	LoadTime    time.Duration // time spent in the loader (summed over goroutines)
	HeldBytes   int64         // Galois keys in memory now
	PeakBytes   int64         // the most Galois key bytes held at once
}

// Set is a bounded, concurrency-safe rlwe.EvaluationKeySet.
type Set struct {
	relin    *rlwe.RelinearizationKey
	elements []uint64 // sorted
	budget   int64
	load     Loader

	mu      sync.Mutex
	entries map[uint64]*entry
	lru     list.List // of *entry, most recently used first; loaded entries only
	stats   Stats
}

type entry struct {
	galEl uint64
	ready chan struct{} // closed when key or err is set
	key   *rlwe.GaloisKey
	err   error
	size  int64
	elem  *list.Element // nil until loaded, and after eviction
}

// New makes a Set holding relin (may be nil) and the Galois keys of
// elements, loaded by load and kept in memory up to budget bytes (a key
// larger than the budget is still served: it is dropped after use).
func New(relin *rlwe.RelinearizationKey, elements []uint64, budget int64, load Loader) *Set {
	els := slices.Clone(elements)
	slices.Sort(els)
	return &Set{relin: relin, elements: slices.Compact(els), budget: budget, load: load, entries: map[uint64]*entry{}}
}

// GetGaloisKey returns the Galois key of galEl, from memory or the loader.
// Concurrent requests for one key wait for one load.
func (s *Set) GetGaloisKey(galEl uint64) (*rlwe.GaloisKey, error) {
	if _, ok := slices.BinarySearch(s.elements, galEl); !ok {
		return nil, fmt.Errorf("%w: no Galois key for element %d in this key set", errs.ErrInvalid, galEl)
	}
	s.mu.Lock()
	if e, ok := s.entries[galEl]; ok {
		if e.elem != nil {
			s.lru.MoveToFront(e.elem)
		}
		s.stats.Hits++
		s.mu.Unlock()
		<-e.ready
		return e.key, e.err
	}
	e := &entry{galEl: galEl, ready: make(chan struct{})}
	s.entries[galEl] = e
	s.mu.Unlock()

	start := time.Now()
	key, err := s.load(galEl)
	if err == nil && key.GaloisElement != galEl {
		err = fmt.Errorf("%w: the key loaded for Galois element %d is for element %d", errs.ErrCorrupt, galEl, key.GaloisElement)
	}
	if err != nil {
		err = fmt.Errorf("Galois key %d: %w", galEl, err)
		key = nil
	}

	s.mu.Lock()
	s.stats.Loads++
	s.stats.LoadTime += time.Since(start)
	e.key, e.err = key, err
	if err != nil {
		delete(s.entries, galEl) // a later request tries again
	} else {
		e.size = int64(key.BinarySize())
		e.elem = s.lru.PushFront(e)
		s.stats.HeldBytes += e.size
		s.stats.PeakBytes = max(s.stats.PeakBytes, s.stats.HeldBytes)
		s.evict()
	}
	s.mu.Unlock()
	close(e.ready)
	return key, err
}

// evict drops the most recently used keys but the one just loaded (the
// front) until the held bytes fit the budget; the key just loaded always
// stays until the next load. Callers that already hold an evicted key keep
// using it; the garbage collector frees it after them.
func (s *Set) evict() {
	for s.stats.HeldBytes > s.budget && s.lru.Len() > 1 {
		e := s.lru.Remove(s.lru.Front().Next()).(*entry)
		e.elem = nil
		delete(s.entries, e.galEl)
		s.stats.HeldBytes -= e.size
	}
}

// GetGaloisKeysList lists the Galois elements the Set has keys for.
func (s *Set) GetGaloisKeysList() []uint64 { return slices.Clone(s.elements) }

// GetRelinearizationKey returns the relinearisation key.
func (s *Set) GetRelinearizationKey() (*rlwe.RelinearizationKey, error) {
	if s.relin == nil {
		return nil, fmt.Errorf("%w: this key set has no relinearisation key", errs.ErrInvalid)
	}
	return s.relin, nil
}

// Budget is the bytes of Galois keys the Set keeps in memory.
func (s *Set) Budget() int64 { return s.budget }

// Stats returns a snapshot of the Set's activity.
func (s *Set) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}
