// Package parallel runs independent pieces of work on all cores. Lattigo
// v6.2 evaluators, encoders and encryptors may be shared across goroutines,
// so parallelism is simply independent operations on separate goroutines.
package parallel

import (
	"runtime"
	"sync"
)

// Workers is the number of goroutines For uses: GOMAXPROCS.
func Workers() int { return runtime.GOMAXPROCS(0) }

// For runs f(0), ..., f(n-1) on Workers() goroutines and returns the first
// error (the remaining work still runs).
func For(n int, f func(i int) error) error {
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	next := make(chan int)
	for w := 0; w < min(Workers(), max(n, 1)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					once.Do(func() { first = err })
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}
