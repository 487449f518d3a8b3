// gosched: cost of a goroutine switch via runtime.Gosched.
//
// Two goroutines on one P (GOMAXPROCS=1) each call runtime.Gosched N
// times, so every call hands the P to the other one.
//
//	gosched [-n N]        QUICK=1 in the environment shrinks N.
//
// Output: go_gosched_ns=<ns per switch> n=<N>
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
	n := flag.Int("n", 10000000, "Gosched calls per goroutine")
	flag.Parse()
	if os.Getenv("QUICK") == "1" {
		*n = 200000
	}
	runtime.GOMAXPROCS(1)

	var wg sync.WaitGroup
	var start sync.WaitGroup
	start.Add(1)
	worker := func() {
		defer wg.Done()
		start.Wait()
		for i := 0; i < *n; i++ {
			runtime.Gosched()
		}
	}
	wg.Add(2)
	go worker()
	go worker()
	t0 := time.Now()
	start.Done()
	wg.Wait()
	el := time.Since(t0)
	fmt.Printf("go_gosched_ns=%.1f n=%d\n", float64(el.Nanoseconds())/float64(2**n), *n)
}
