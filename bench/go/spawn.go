// spawn: cost of creating, running and finishing a goroutine.
//
// Spawns N goroutines that each just call wg.Done, then waits for all.
// Set GOMAXPROCS in the environment to compare 1 and 2 Ps.
//
//	spawn [-n N]          QUICK=1 in the environment shrinks N.
//
// Output: go_spawn_ns=<ns per goroutine> gomaxprocs=<P> n=<N>
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
	n := flag.Int("n", 2000000, "goroutines to spawn")
	flag.Parse()
	if os.Getenv("QUICK") == "1" {
		*n = 100000
	}

	var wg sync.WaitGroup
	t0 := time.Now()
	for i := 0; i < *n; i++ {
		wg.Add(1)
		go func() { wg.Done() }()
	}
	wg.Wait()
	el := time.Since(t0)
	fmt.Printf("go_spawn_ns=%.1f gomaxprocs=%d n=%d\n",
		float64(el.Nanoseconds())/float64(*n), runtime.GOMAXPROCS(0), *n)
}
