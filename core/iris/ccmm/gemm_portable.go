//go:build !(cgo && amd64)

package ccmm

// hasVNNI and hasAVX2 are false where the cgo engines are not built (no
// cgo or not amd64): GEMM runs on the Go kernel.
const (
	hasVNNI = false
	hasAVX2 = false
)

// The engines' bounds, as in the cgo build (unused here).
const (
	maxVNNIInner   = 1 << 26
	maxVNNIModulus = 1 << 31
	maxAVX2Inner   = 1 << 26
	maxAVX2Modulus = 1 << 31
)

// The engines' packed operands are not built here; newRight never makes
// one (hasVNNI and hasAVX2 are false).
type (
	vnniRight struct{}
	avx2Right struct{}
)

func newVNNIRight(Mat, uint64) (*vnniRight, error) { panic("ccmm: no VNNI engine in this build") }
func newAVX2Right(Mat, uint64) (*avx2Right, error) { panic("ccmm: no AVX2 engine in this build") }
func (*vnniRight) mul(Mat) Mat                     { panic("ccmm: no VNNI engine in this build") }
func (*avx2Right) mul(Mat) Mat                     { panic("ccmm: no AVX2 engine in this build") }
