package ccmm

import (
	"bytes"
	"math/rand/v2"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user+system CPU time: with the machine shared,
// MACs per CPU-second is steadier than MACs per wall second.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func report(b *testing.B, m, k, n int, cpu0 time.Duration) {
	macs := float64(m) * float64(k) * float64(n) * float64(b.N)
	b.ReportMetric(macs/b.Elapsed().Seconds()/1e9, "GMAC/s")
	if cpu := cpuTime() - cpu0; cpu > 0 {
		b.ReportMetric(macs/cpu.Seconds()/1e9, "GMAC/cpu-s")
	}
}

// benchDims returns the GEMM size of the benchmark: m database rows (a
// slice of the 2^14 of one group; ENCMATCH_CCMM_BENCH_ROWS, default 256),
// inner dimension 16,384 (the iris code length) and n query columns
// (ENCMATCH_CCMM_BENCH_COLS, default 992: 32 eyes x 31 rotations): one of
// the four GEMMs of the CCMM for one prime.
func benchDims() (m, k, n int) {
	m, n = 256, 992
	if v, err := strconv.Atoi(os.Getenv("ENCMATCH_CCMM_BENCH_ROWS")); err == nil && v > 0 {
		m = v &^ 1
	}
	if v, err := strconv.Atoi(os.Getenv("ENCMATCH_CCMM_BENCH_COLS")); err == nil && v > 0 {
		n = v
	}
	return m, 1 << 14, n
}

func benchOperands(m, k, n int, q uint64) (Mat, Mat) {
	rng := rand.New(rand.NewPCG(9, 1))
	x, yt := NewMat(m, k), NewMat(n, k)
	for i := range x.Data {
		x.Data[i] = int32(rng.Int64N(int64(q))) - int32(q/2)
	}
	for i := range yt.Data {
		yt.Data[i] = int32(rng.Int64N(int64(q))) - int32(q/2)
	}
	return x, yt
}

// BenchmarkGEMMInt64 measures the int64 GEMM modulo a 20-bit prime
// (int32 residues, int64 accumulators), in GMAC/s.
func BenchmarkGEMMInt64(b *testing.B) {
	m, k, n := benchDims()
	q := uint64(1048193)
	x, yt := benchOperands(m, k, n, q)
	b.ResetTimer()
	cpu0 := cpuTime()
	for range b.N {
		gemmGo(x, yt, q)
	}
	report(b, m, k, n, cpu0)
}

// BenchmarkGEMMVNNI is the same product on the AVX-512 VNNI engine (nine
// u8 x s8 digit products; GMAC counts the modular product once).
func BenchmarkGEMMVNNI(b *testing.B) { benchEngine(b, "AVX-512 VNNI", hasVNNI, onceVNNI, 1048193) }

// BenchmarkGEMMVNNIWide is the VNNI engine modulo 2^31 - 1 (four digits,
// sixteen products): BenchmarkGEMMAVX2Wide's product on a CPU with AVX-512
// VNNI.
func BenchmarkGEMMVNNIWide(b *testing.B) {
	benchEngine(b, "AVX-512 VNNI", hasVNNI, onceVNNI, 2147483647)
}

// BenchmarkGEMMAVX2 is the same product on the AVX2 engine (four s16 x s16
// digit products; GMAC counts the modular product once).
func BenchmarkGEMMAVX2(b *testing.B) { benchEngine(b, "AVX2", hasAVX2, onceAVX2, 1048193) }

// BenchmarkGEMMAVX2Wide is the AVX2 engine modulo 2^31 - 1 (three digits,
// nine products): the size of the CCMM primes that hold a fold
// polynomial's levels (docs/IRIS.md, "Levels for f").
func BenchmarkGEMMAVX2Wide(b *testing.B) { benchEngine(b, "AVX2", hasAVX2, onceAVX2, 2147483647) }

// BenchmarkGEMMInt64Wide is the Go kernel modulo 2^31 - 1 (two digits,
// four int64 products).
func BenchmarkGEMMInt64Wide(b *testing.B) {
	benchEngine(b, "Go", true, func(x, yt Mat, q uint64) (Mat, error) { return gemmGo(x, yt, q), nil }, 2147483647)
}

// onceVNNI is one product on the VNNI engine, its right operand packed
// for it (GEMM's work on that engine).
func onceVNNI(x, yt Mat, q uint64) (Mat, error) {
	r, err := newVNNIRight(yt, q)
	if err != nil {
		return Mat{}, err
	}
	return r.mul(x), nil
}

// onceAVX2 is onceVNNI on the AVX2 engine.
func onceAVX2(x, yt Mat, q uint64) (Mat, error) {
	r, err := newAVX2Right(yt, q)
	if err != nil {
		return Mat{}, err
	}
	return r.mul(x), nil
}

// benchEngine measures one engine at benchDims modulo q, skipping where
// this CPU or build does not run it.
func benchEngine(b *testing.B, name string, has bool, gemm func(x, yt Mat, q uint64) (Mat, error), q uint64) {
	if !has {
		b.Skipf("this CPU or build has no %s engine", name)
	}
	m, k, n := benchDims()
	x, yt := benchOperands(m, k, n, q)
	b.ResetTimer()
	cpu0 := cpuTime()
	for range b.N {
		if _, err := gemm(x, yt, q); err != nil {
			b.Fatal(err)
		}
	}
	report(b, m, k, n, cpu0)
}

// BenchmarkSeededFill regenerates one prime's seeded a-part at the iris
// size (2^14 columns of ring 2^14: what a query's product regenerates per
// prime and matrix, SharedAReader.Next), in residues per second.
func BenchmarkSeededFill(b *testing.B) {
	seed := bytes.Repeat([]byte{1}, SeedSize)
	const q = 1146881 // an NTT prime of ring 2^14 just above 2^20
	s, err := newSeededA(seed, 1<<14, []uint64{q})
	if err != nil {
		b.Fatal(err)
	}
	m := NewMat(1<<14, 1<<14)
	b.ResetTimer()
	for range b.N {
		s.fill(m, 0, 0)
	}
	b.ReportMetric(float64(len(m.Data))*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mresidues/s")
}
