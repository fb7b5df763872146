//go:build !(cgo && amd64)

package ccmm

// hasVNNI is false where the VNNI engine is not built (no cgo or not amd64).
const hasVNNI = false

// maxVNNIInner and maxVNNIModulus match the VNNI build's bounds (unused here).
const (
	maxVNNIInner   = 1 << 26
	maxVNNIModulus = 1 << 23
)

// gemmVNNI is not built here; GEMM never calls it (hasVNNI is false).
func gemmVNNI(x, yt Mat, q uint64) (Mat, error) {
	return gemmGo(x, yt, q), nil
}
