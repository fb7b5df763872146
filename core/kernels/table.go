package kernels

import (
	"math/bits"
	"sync"
)

// table is one NTT's roots in one kernel set's form, with n^-1 mod q: for
// IFMA canonical w[i] (Lattigo stores w[i]*2^64 mod q) and Shoup
// companions wp[i] = floor(w[i]*2^52/q), floor(w[i]*2^64/q) for primes of
// 2^51 or more (the 64-bit butterflies); for AVX2 w[i] as doubles and
// w[i]/q. Only the active set's form is built: each costs two words per
// root beside Lattigo's own table.
type table struct {
	w, wp           []uint64 // IFMA
	wd, wq          []float64
	nInv, nInvShoup uint64
	nInvD, nInvQ    float64
	first, last     uint64 // Lattigo's roots[1] and roots[n-1], checked on every use
}

// tableKey identifies a root table. Lattigo derives every table from q, n
// and psi (its 2n-th root of unity, roots[n/2] in Montgomery form) by one
// formula (ring.SubRing.generateNTTConstants: roots[bitrev(j)] = psi^j);
// rootTable checks a table against that formula before caching it, so the
// key determines the table.
type tableKey struct {
	q       uint64
	n       int
	inverse bool
	psi     uint64
	set     int32
}

var tables sync.Map // tableKey -> *table; nil entries mark tables no kernel takes

// rootTable gives the kernels' form of Lattigo's roots, nil when they do
// not follow Lattigo's formula.
func rootTable(p *prime, n int, roots []uint64, inverse bool, set int32) *table {
	key := tableKey{q: p.q, n: n, inverse: inverse, psi: roots[n/2], set: set}
	v, ok := tables.Load(key)
	if !ok {
		// Two first uses may race: the first table stored serves both.
		v, _ = tables.LoadOrStore(key, newTable(p, n, roots, set))
	}
	t := v.(*table)
	if t == nil || t.first != roots[1] || t.last != roots[n-1] {
		return nil
	}
	return t
}

func newTable(p *prime, n int, roots []uint64, set int32) *table {
	q := p.q
	logN := bits.Len(uint(n)) - 1
	w := make([]uint64, n)
	for i, r := range roots {
		if r >= q {
			return nil
		}
		w[i] = fromMontgomery(r, p)
	}
	psi := w[n/2]
	if w[0] != 1 {
		return nil
	}
	for j := 1; j < n; j++ {
		prev := bits.Reverse64(uint64(j-1)) >> (64 - logN)
		next := bits.Reverse64(uint64(j)) >> (64 - logN)
		if w[next] != mulMod(w[prev], psi, q) {
			return nil
		}
	}
	nInv := powMod(uint64(n), q-2, q)
	t := &table{nInv: nInv, first: roots[1], last: roots[n-1]}
	if set == useAVX2 {
		t.wd, t.wq = make([]float64, n), make([]float64, n)
		for i, v := range w {
			t.wd[i], t.wq[i] = float64(v), float64(v)/float64(q)
		}
		t.nInvD, t.nInvQ = float64(nInv), float64(nInv)/float64(q)
		return t
	}
	t.w, t.wp = w, make([]uint64, n)
	shoup := func(v uint64) uint64 {
		if q >= maxPrime {
			r, _ := bits.Div64(v, 0, q)
			return r
		}
		r, _ := bits.Div64(v>>12, v<<52, q)
		return r
	}
	for i, v := range w {
		t.wp[i] = shoup(v)
	}
	t.nInvShoup = shoup(nInv)
	return t
}

// fromMontgomery is r*2^-64 mod q, canonical (Lattigo's MRed(r, 1)): with
// m = r q^-1 mod 2^64, the low words of r and m*q cancel, so
// (r - m q) / 2^64 = -hi(m q), and hi(m q) < q.
func fromMontgomery(r uint64, p *prime) uint64 {
	h, _ := bits.Mul64(r*p.mred, p.q)
	if h == 0 {
		return 0
	}
	return p.q - h
}
