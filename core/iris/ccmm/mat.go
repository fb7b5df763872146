package ccmm

import (
	"fmt"
	"math"
	"runtime"
	"sync"

	"encmatch/core/base/errs"
)

// IntMat is a plaintext integer matrix, row-major.
type IntMat struct {
	Rows, Cols int
	Data       []int64
}

// NewIntMat allocates a zero rows x cols matrix.
func NewIntMat(rows, cols int) IntMat {
	return IntMat{Rows: rows, Cols: cols, Data: make([]int64, rows*cols)}
}

// At returns entry (i, j).
func (m IntMat) At(i, j int) int64 { return m.Data[i*m.Cols+j] }

// Dims returns the number of rows and columns.
func (m IntMat) Dims() (rows, cols int) { return m.Rows, m.Cols }

// MaxAbs is the largest absolute entry.
func (m IntMat) MaxAbs() int64 {
	var x int64
	for _, v := range m.Data {
		x = max(x, v, -v)
	}
	return x
}

// Matrix is a read-only integer matrix: an IntMat, a Mat of exact
// integers (MulSecret's), or a caller's compact form (iris codes as int8).
type Matrix interface {
	Dims() (rows, cols int)
	At(i, j int) int64
}

// maxAbs is the largest absolute entry of m.
func maxAbs(m Matrix) int64 {
	if im, ok := m.(IntMat); ok {
		return im.MaxAbs()
	}
	rows, cols := m.Dims()
	var x int64
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			v := m.At(i, j)
			x = max(x, v, -v)
		}
	}
	return x
}

// matrixPlain reads entry (row, j0 + col) of m modulo moduli[i].
func matrixPlain(m Matrix, moduli []uint64, j0 int) plainFunc {
	return func(i, r, c int) uint64 { return modInt(m.At(r, j0+c), moduli[i]) }
}

// MulInt is the plaintext model: the exact integer product x*y.
func MulInt(x, y IntMat) (IntMat, error) {
	if x.Cols != y.Rows {
		return IntMat{}, fmt.Errorf("%w: product of %dx%d by %dx%d", errs.ErrInvalid, x.Rows, x.Cols, y.Rows, y.Cols)
	}
	out := NewIntMat(x.Rows, y.Cols)
	for i := 0; i < x.Rows; i++ {
		row := out.Data[i*y.Cols : (i+1)*y.Cols]
		for l := 0; l < x.Cols; l++ {
			v := x.Data[i*x.Cols+l]
			if v == 0 {
				continue
			}
			yr := y.Data[l*y.Cols : (l+1)*y.Cols]
			for j := range row {
				row[j] += v * yr[j]
			}
		}
	}
	return out, nil
}

// Mat is a matrix of residues modulo one prime, centered in
// (-q/2, q/2], row-major: the operand of the GEMMs. (MulSecret returns
// exact integers in one.)
type Mat struct {
	Rows, Cols int
	Data       []int32
}

// NewMat allocates a zero rows x cols residue matrix.
func NewMat(rows, cols int) Mat { return Mat{Rows: rows, Cols: cols, Data: make([]int32, rows*cols)} }

// Dims returns the number of rows and columns.
func (m Mat) Dims() (rows, cols int) { return m.Rows, m.Cols }

// At returns entry (i, j).
func (m Mat) At(i, j int) int64 { return int64(m.Data[i*m.Cols+j]) }

// Transpose returns the transposed matrix.
func (m Mat) Transpose() Mat {
	t := NewMat(m.Cols, m.Rows)
	for i := 0; i < m.Rows; i++ {
		for j := 0; j < m.Cols; j++ {
			t.Data[j*m.Rows+i] = m.Data[i*m.Cols+j]
		}
	}
	return t
}

// center maps a residue in [0, q) to (-q/2, q/2].
func center(v, q uint64) int32 {
	// Branch free: residues are uniform, so a branch on v > q/2 is
	// mispredicted half the time (BenchmarkSeededFill: 1.25x faster
	// without it).
	over := int64(q/2-v) >> 63 // -1 where v > q/2 (v < q < 2^63), else 0
	return int32(int64(v) - over&int64(q))
}

// Uncenter maps a centered residue (as the matrices hold them) back to
// [0, q).
func Uncenter(v int32, q uint64) uint64 {
	if v < 0 {
		return uint64(int64(v) + int64(q))
	}
	return uint64(v)
}

// modInt maps an integer to [0, q).
func modInt(v int64, q uint64) uint64 {
	r := v % int64(q)
	if r < 0 {
		r += int64(q)
	}
	return uint64(r)
}

// GEMMEngine names the engine GEMM runs on for moduli below 2^31 on this
// machine and build: "avx512-vnni" (gemm_vnni.go, about 45 GMAC/s on 2
// Zen 5 cores below 2^23), "avx2-int16" (gemm_avx2.go, for CPUs without AVX-512 VNNI)
// or "int64-go" (the Go kernel: about 3.7 GMAC/s on the Zen 5 cores, 2.2
// on 2 cores of an AVX2-only EPYC), so that a benchmark says which one it
// measured.
func GEMMEngine() string {
	switch {
	case hasVNNI:
		return "avx512-vnni"
	case hasAVX2:
		return "avx2-int16"
	}
	return "int64-go"
}

// GEMM returns x * yt^T modulo q (yt is the right operand transposed, so
// that both operands are read along rows), centered; the operands are
// centered residues. It runs on the AVX-512 VNNI engine (gemm_vnni.go)
// where the CPU has it and q < 2^31, else on the AVX2 engine
// (gemm_avx2.go) where the CPU has that and q < 2^31, otherwise on the
// int64 Go kernel (gemmGo). It parallelises over rows of x with
// GOMAXPROCS goroutines.
func GEMM(x, yt Mat, q uint64) Mat {
	return newRight(yt, q).mul(x)
}

// right is the right operand of products x * yt^T modulo q, packed once
// by the engine GEMM chooses for it: MultiplyRawFrom multiplies one query
// by a database band after band.
type right struct {
	yt   Mat
	q    uint64
	vnni *vnniRight // the engine's packed operand, or nil
	avx2 *avx2Right
}

func newRight(yt Mat, q uint64) *right {
	r := &right{yt: yt, q: q}
	var err error
	switch {
	case hasVNNI && q < maxVNNIModulus && yt.Cols <= maxVNNIInner:
		r.vnni, err = newVNNIRight(yt, q)
	case hasAVX2 && q < maxAVX2Modulus && yt.Cols <= maxAVX2Inner:
		r.avx2, err = newAVX2Right(yt, q)
	}
	if err != nil {
		panic(err) // unreachable: the conditions above are the engines'
	}
	return r
}

// mul returns x * yt^T modulo q, centered.
func (r *right) mul(x Mat) Mat {
	if x.Cols != r.yt.Cols {
		panic(fmt.Sprintf("ccmm: GEMM inner dimensions %d and %d", x.Cols, r.yt.Cols))
	}
	switch {
	case r.vnni != nil:
		return r.vnni.mul(x)
	case r.avx2 != nil:
		return r.avx2.mul(x)
	}
	return gemmGo(x, r.yt, r.q)
}

// checkEngineArgs refuses (ErrModulus) what a digit engine cannot take: a
// modulus outside [3, maxModulus) or an inner dimension above maxInner.
func checkEngineArgs(engine string, inner int, q, maxModulus uint64, maxInner int) error {
	if q >= maxModulus || q < 3 {
		return fmt.Errorf("%w: the %s GEMM needs an odd modulus below %d, got %d", ErrModulus, engine, maxModulus, q)
	}
	if inner > maxInner {
		return fmt.Errorf("%w: %s GEMM of inner dimension %d, at most %d", ErrModulus, engine, inner, maxInner)
	}
	return nil
}

// gemmGo is GEMM on the int64 Go kernel: directly where x.Cols (q/2)^2 <
// 2^62, else on the balanced base-2^16 digits of both operands (four
// products of entries below 2^15, exact for any inner dimension below
// 2^32) recombined modulo q.
func gemmGo(x, yt Mat, q uint64) Mat {
	if h := float64(q / 2); float64(x.Cols)*h*h < math.Ldexp(1, 62) {
		return gemmDirect(x, yt, q)
	}
	xl, xh := split16(x)
	yl, yh := split16(yt)
	ll, lh, hl, hh := gemmDirect(xl, yl, q), gemmDirect(xl, yh, q), gemmDirect(xh, yl, q), gemmDirect(xh, yh, q)
	qi := int64(q)
	w1 := int64(1<<16) % qi
	w2 := w1 * w1 % qi
	for i := range ll.Data {
		mid := (int64(lh.Data[i]) + int64(hl.Data[i])) % qi * w1 % qi
		ll.Data[i] = reduce(int64(ll.Data[i])+mid+int64(hh.Data[i])*w2%qi, qi)
	}
	return ll
}

// gemmDirect is GEMM on the int64 Go kernel, exact while x.Cols (q/2)^2 <
// 2^63.
func gemmDirect(x, yt Mat, q uint64) Mat {
	c := NewMat(x.Rows, yt.Rows)
	parallelRows(x.Rows, func(i0, i1 int) { gemmInt(x, yt, q, c, i0, i1) })
	return c
}

// split16 splits every entry v of m into balanced base-2^16 digits
// v = lo + 2^16 hi, lo in [-2^15, 2^15).
func split16(m Mat) (lo, hi Mat) {
	lo, hi = NewMat(m.Rows, m.Cols), NewMat(m.Rows, m.Cols)
	for i, v := range m.Data {
		l := (v+1<<15)&0xffff - 1<<15
		lo.Data[i], hi.Data[i] = l, (v-l)>>16
	}
	return lo, hi
}

// parallelRows splits [0, rows) into even chunks, one per goroutine.
func parallelRows(rows int, f func(i0, i1 int)) {
	w := max(1, min(runtime.GOMAXPROCS(0), rows/2))
	chunk := (rows/w + 1) &^ 1
	var wg sync.WaitGroup
	for i0 := 0; i0 < rows; i0 += chunk {
		wg.Add(1)
		go func(i0, i1 int) { defer wg.Done(); f(i0, i1) }(i0, min(rows, i0+chunk))
	}
	wg.Wait()
}

// reduce maps v to its centered residue modulo odd q, in [-(q-1)/2, (q-1)/2].
func reduce(v int64, q int64) int32 {
	r := v % q
	if r > q/2 {
		r -= q
	} else if r < -q/2 {
		r += q
	}
	return int32(r)
}

// gemmInt is the int64 kernel: 2 rows x 4 columns of register blocking.
func gemmInt(x, yt Mat, q uint64, c Mat, i0, i1 int) {
	k, n := x.Cols, yt.Rows
	qi := int64(q)
	i := i0
	for ; i+1 < i1; i += 2 {
		x0 := x.Data[i*k : (i+1)*k]
		x1 := x.Data[(i+1)*k : (i+2)*k]
		j := 0
		for ; j+3 < n; j += 4 {
			// Reslicing to len(x0) lets the compiler drop the bounds checks
			// of the inner loop.
			x1 := x1[:len(x0)]
			y0 := yt.Data[j*k : (j+1)*k][:len(x0)]
			y1 := yt.Data[(j+1)*k : (j+2)*k][:len(x0)]
			y2 := yt.Data[(j+2)*k : (j+3)*k][:len(x0)]
			y3 := yt.Data[(j+3)*k : (j+4)*k][:len(x0)]
			var c00, c01, c02, c03, c10, c11, c12, c13 int64
			for l := range x0 {
				a0, a1 := int64(x0[l]), int64(x1[l])
				b0, b1, b2, b3 := int64(y0[l]), int64(y1[l]), int64(y2[l]), int64(y3[l])
				c00 += a0 * b0
				c01 += a0 * b1
				c02 += a0 * b2
				c03 += a0 * b3
				c10 += a1 * b0
				c11 += a1 * b1
				c12 += a1 * b2
				c13 += a1 * b3
			}
			r0 := c.Data[i*n+j : i*n+j+4]
			r1 := c.Data[(i+1)*n+j : (i+1)*n+j+4]
			r0[0], r0[1], r0[2], r0[3] = reduce(c00, qi), reduce(c01, qi), reduce(c02, qi), reduce(c03, qi)
			r1[0], r1[1], r1[2], r1[3] = reduce(c10, qi), reduce(c11, qi), reduce(c12, qi), reduce(c13, qi)
		}
		for ; j < n; j++ {
			c.Data[i*n+j] = reduce(dotInt(x0, yt.Data[j*k:(j+1)*k]), qi)
			c.Data[(i+1)*n+j] = reduce(dotInt(x1, yt.Data[j*k:(j+1)*k]), qi)
		}
	}
	for ; i < i1; i++ {
		for j := 0; j < n; j++ {
			c.Data[i*n+j] = reduce(dotInt(x.Data[i*k:(i+1)*k], yt.Data[j*k:(j+1)*k]), qi)
		}
	}
}

func dotInt(a, b []int32) int64 {
	var s int64
	b = b[:len(a)]
	for l, v := range a {
		s += int64(v) * int64(b[l])
	}
	return s
}

// addMod returns a + b modulo q, centered, in place in a.
func addMod(a, b Mat, q uint64) {
	qi := int64(q)
	for i, v := range b.Data {
		a.Data[i] = reduce(int64(a.Data[i])+int64(v), qi)
	}
}
