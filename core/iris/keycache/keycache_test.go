package keycache

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"encmatch/core/base/errs"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// fixture makes small parameters, a secret and the Galois keys of the
// rotations 1..n.
func fixture(t *testing.T, n int) (ckks.Parameters, *rlwe.SecretKey, map[uint64]*rlwe.GaloisKey) {
	t.Helper()
	params, err := ckks.NewParametersFromLiteral(ckks.ParametersLiteral{LogN: 10, LogQ: []int{40, 30}, LogP: []int{45}, LogDefaultScale: 30})
	if err != nil {
		t.Fatal(err)
	}
	kg := rlwe.NewKeyGenerator(params)
	sk := kg.GenSecretKeyNew()
	keys := map[uint64]*rlwe.GaloisKey{}
	for r := 1; r <= n; r++ {
		g := params.GaloisElement(r)
		keys[g] = kg.GenGaloisKeyNew(g, sk)
	}
	return params, sk, keys
}

// counting is a loader over keys that counts its calls per element.
type counting struct {
	keys  map[uint64]*rlwe.GaloisKey
	calls sync.Map // element -> *atomic.Int64
	fail  atomic.Bool
}

func (c *counting) load(g uint64) (*rlwe.GaloisKey, error) {
	n, _ := c.calls.LoadOrStore(g, new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
	if c.fail.Load() {
		return nil, errors.New("disk on fire")
	}
	return c.keys[g], nil
}

func (c *counting) count(g uint64) int64 {
	n, ok := c.calls.Load(g)
	if !ok {
		return 0
	}
	return n.(*atomic.Int64).Load()
}

func elements(keys map[uint64]*rlwe.GaloisKey) []uint64 {
	var out []uint64
	for g := range keys {
		out = append(out, g)
	}
	return out
}

// TestBudgetEvictsMostRecentlyUsed: with room for two keys, a third
// evicts the most recently used one before it; the budget is kept.
func TestBudgetEvictsMostRecentlyUsed(t *testing.T) {
	params, _, keys := fixture(t, 3)
	g1, g2, g3 := params.GaloisElement(1), params.GaloisElement(2), params.GaloisElement(3)
	size := int64(keys[g1].BinarySize())
	c := &counting{keys: keys}
	s := New(nil, elements(keys), 2*size, c.load)
	for _, g := range []uint64{g1, g2, g1, g3, g2, g1} { // g3 evicts g1 (used just before it); g1 is read again
		k, err := s.GetGaloisKey(g)
		if err != nil || k != keys[g] {
			t.Fatalf("element %d: %v", g, err)
		}
	}
	if c.count(g1) != 2 || c.count(g2) != 1 || c.count(g3) != 1 {
		t.Fatalf("loads: g1 %d, g2 %d, g3 %d; want 2, 1, 1", c.count(g1), c.count(g2), c.count(g3))
	}
	st := s.Stats()
	if st.Loads != 4 || st.Hits != 2 || st.HeldBytes != 2*size || st.PeakBytes != 3*size {
		t.Fatalf("stats %+v (key %d bytes)", st, size)
	}
}

// TestLoopLongerThanTheBudget: a bootstrap's pattern, the same keys in the
// same order again and again, more of them than the budget holds: after
// the first pass, every pass hits on at least budget - 1 keys (least
// recently used first would hit on none).
func TestLoopLongerThanTheBudget(t *testing.T) {
	_, _, keys := fixture(t, 6)
	loop := elements(keys)
	size := int64(keys[loop[0]].BinarySize())
	c := &counting{keys: keys}
	const budget, passes = 3, 5
	s := New(nil, loop, budget*size, c.load)
	for p := 0; p < passes; p++ {
		for _, g := range loop {
			if _, err := s.GetGaloisKey(g); err != nil {
				t.Fatal(err)
			}
		}
	}
	st := s.Stats()
	if max := len(loop) + (passes-1)*(len(loop)-(budget-1)); st.Loads > max || st.HeldBytes > budget*size {
		t.Fatalf("%d loads for %d passes over %d keys with room for %d (want at most %d); %d bytes held", st.Loads, passes, len(loop), budget, max, st.HeldBytes)
	}
	t.Logf("%d loads, %d hits", st.Loads, st.Hits)
}

func TestConcurrentRequestsShareOneLoad(t *testing.T) {
	params, _, keys := fixture(t, 1)
	g := params.GaloisElement(1)
	c := &counting{keys: keys}
	s := New(nil, elements(keys), 1<<40, c.load)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if k, err := s.GetGaloisKey(g); err != nil || k != keys[g] {
				t.Errorf("got %v, %v", k, err)
			}
		}()
	}
	wg.Wait()
	if c.count(g) != 1 {
		t.Fatalf("%d loads for one key", c.count(g))
	}
}

func TestErrorsAreReportedAndRetried(t *testing.T) {
	params, sk, keys := fixture(t, 2)
	g1, g2 := params.GaloisElement(1), params.GaloisElement(2)
	c := &counting{keys: keys}
	s := New(nil, []uint64{g1, g2}, 1<<40, c.load)
	if _, err := s.GetGaloisKey(params.GaloisElement(5)); !errors.Is(err, errs.ErrInvalid) || c.count(params.GaloisElement(5)) != 0 {
		t.Fatalf("unknown element: %v (loads %d)", err, c.count(params.GaloisElement(5)))
	}
	c.fail.Store(true)
	if _, err := s.GetGaloisKey(g1); err == nil {
		t.Fatal("a failing load was not reported")
	}
	c.fail.Store(false)
	if k, err := s.GetGaloisKey(g1); err != nil || k != keys[g1] {
		t.Fatalf("retry after a failed load: %v", err)
	}
	// A loader that returns another element's key.
	wrong := New(nil, []uint64{g2}, 1<<40, func(uint64) (*rlwe.GaloisKey, error) { return keys[g1], nil })
	if _, err := wrong.GetGaloisKey(g2); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("a key of another element: %v", err)
	}
	if _, err := s.GetRelinearizationKey(); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("missing relinearisation key: %v", err)
	}
	rlk := rlwe.NewKeyGenerator(params).GenRelinearizationKeyNew(sk)
	if k, err := New(rlk, nil, 0, c.load).GetRelinearizationKey(); err != nil || k != rlk {
		t.Fatalf("relinearisation key: %v", err)
	}
}

// TestRotationsThroughTheCache: an evaluator on a Set whose budget holds
// one key rotates exactly as one on Lattigo's in-memory set.
func TestRotationsThroughTheCache(t *testing.T) {
	params, sk, keys := fixture(t, 3)
	c := &counting{keys: keys}
	var gks []*rlwe.GaloisKey
	for _, k := range keys {
		gks = append(gks, k)
	}
	mem := ckks.NewEvaluator(params, rlwe.NewMemEvaluationKeySet(nil, gks...))
	cached := ckks.NewEvaluator(params, New(nil, elements(keys), 0, c.load))
	enc := ckks.NewEncoder(params)
	pt := ckks.NewPlaintext(params, params.MaxLevel())
	vals := make([]float64, params.MaxSlots())
	for i := range vals {
		vals[i] = float64(i)
	}
	if err := enc.Encode(vals, pt); err != nil {
		t.Fatal(err)
	}
	ct, err := rlwe.NewEncryptor(params, sk).EncryptNew(pt)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []int{1, 2, 3, 1, 3, 2} {
		want, err := mem.RotateNew(ct, r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := cached.RotateNew(ct, r)
		if err != nil {
			t.Fatal(err)
		}
		if !want.Value[0].Equal(&got.Value[0]) || !want.Value[1].Equal(&got.Value[1]) {
			t.Fatalf("rotation by %d differs through the cache", r)
		}
	}
}
