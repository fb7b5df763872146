//go:build !(cgo && amd64)

package kernels

// Without cgo or off amd64 only the scalar code runs.
const (
	hasIFMA = false
	hasAVX2 = false
)

func montIFMA(Op, []uint64, []uint64, int, []uint64, *prime) { panic("kernels: no IFMA build") }

func subMontIFMA([]uint64, []uint64, uint64, []uint64, *prime) { panic("kernels: no IFMA build") }

func tensorIFMA(_, _, _, _ []*uint64, _, _, _ []uint64, _ *prime) { panic("kernels: no IFMA build") }

func nttIFMA([]uint64, []uint64, *prime, *table, bool) { panic("kernels: no IFMA build") }

func inttIFMA([]uint64, []uint64, *prime, *table) { panic("kernels: no IFMA build") }

func nttAVX2([]uint64, []uint64, uint64, *table) { panic("kernels: no AVX2 build") }

func inttAVX2([]uint64, []uint64, uint64, *table) { panic("kernels: no AVX2 build") }

func tensorAVX2(_, _, _, _ []*uint64, _, _, _ []uint64, _ *prime) { panic("kernels: no AVX2 build") }

func basisExtendIFMA(int, []*uint64, []uint64, []uint64, []uint64, []uint64, []*uint64, []uint64, []uint64, []uint64, []uint64, int) {
	panic("kernels: no IFMA build")
}

func modvecIFMA(ModOp, []uint64, []uint64, uint64, []uint64, uint64, [2]uint64) {
	panic("kernels: no IFMA build")
}
