// Command floodsamples prints draws of the flooding distribution a
// decryption share uses (Lattigo's ring.DiscreteGaussian with Bound 6
// sigma, as core/threshold's makeShare builds it), one centred integer per
// line, for bench-results/flooding-sampler/support.py to check against the
// support it computes from Lattigo's ziggurat tables.
//
//	go run ./threshold/internal/floodsamples -log-sigma 30 -n 131072
package main

import (
	"bufio"
	"flag"
	"fmt"
	"math"
	"os"

	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/utils/sampling"
)

func main() {
	logSigma := flag.Float64("log-sigma", 30, "log2 of the standard deviation")
	n := flag.Int("n", 1<<17, "number of draws (a multiple of 2^14)")
	flag.Parse()
	if err := run(*logSigma, *n); err != nil {
		fmt.Fprintln(os.Stderr, "floodsamples:", err)
		os.Exit(1)
	}
}

func run(logSigma float64, n int) error {
	const logN = 14
	if n <= 0 || n%(1<<logN) != 0 || logSigma < 1 || logSigma > 58 {
		return fmt.Errorf("need n a positive multiple of %d and log-sigma in [1, 58]", 1<<logN)
	}
	r, err := ring.NewRing(1<<logN, []uint64{0x1fffffffffe00001}) // a 61-bit NTT prime: centred draws below 2^60
	if err != nil {
		return err
	}
	q := r.SubRings[0].Modulus
	prng, err := sampling.NewPRNG()
	if err != nil {
		return err
	}
	sigma := math.Exp2(logSigma)
	s, err := ring.NewSampler(prng, r, ring.DiscreteGaussian{Sigma: sigma, Bound: 6 * sigma}, false)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(os.Stdout)
	for k := 0; k < n>>logN; k++ {
		for _, c := range s.ReadNew().Coeffs[0] {
			v := int64(c)
			if c > q/2 {
				v = int64(c) - int64(q)
			}
			fmt.Fprintln(w, v)
		}
	}
	return w.Flush()
}
