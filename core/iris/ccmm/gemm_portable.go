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

// gemmVNNI is not built here; GEMM never calls it (hasVNNI is false).
func gemmVNNI(x, yt Mat, q uint64) (Mat, error) {
	return gemmGo(x, yt, q), nil
}

// gemmAVX2 is not built here; GEMM never calls it (hasAVX2 is false).
func gemmAVX2(x, yt Mat, q uint64) (Mat, error) {
	return gemmGo(x, yt, q), nil
}
