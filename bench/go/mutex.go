// mutex: 8 goroutines incrementing one counter under sync.Mutex.
//
// The critical section is a load, a tiny bit of arithmetic and a store.
//
//	mutex [-n TOTAL_OPS] [-g GOROUTINES]   QUICK=1 shrinks TOTAL_OPS.
//
// Output: go_mutex_ops_per_sec=<rate> goroutines=<G> gomaxprocs=<P> n=<N>
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"
)

func main() {
	n := flag.Int("n", 20000000, "total increments")
	g := flag.Int("g", 8, "goroutines")
	flag.Parse()
	if os.Getenv("QUICK") == "1" {
		*n = 1000000
	}
	per := *n / *g

	var mu sync.Mutex
	var counter, mix uint64
	var wg sync.WaitGroup
	wg.Add(*g)
	t0 := time.Now()
	for i := 0; i < *g; i++ {
		go func() {
			defer wg.Done()
			for j := 0; j < per; j++ {
				mu.Lock()
				counter++
				mix = mix*31 + counter
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	el := time.Since(t0)
	if counter != uint64(per**g) {
		fmt.Fprintf(os.Stderr, "mutex: counter %d, want %d\n", counter, per**g)
		os.Exit(1)
	}
	fmt.Printf("go_mutex_ops_per_sec=%.0f goroutines=%d gomaxprocs=%d n=%d\n",
		float64(counter)/el.Seconds(), *g, runtime.GOMAXPROCS(0), counter)
	_ = mix
}
