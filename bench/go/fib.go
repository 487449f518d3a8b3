// fib: fork-join recursion, one goroutine per call above a cutoff.
//
// fib(n) spawns a goroutine for fib(n-1) when n > cutoff, computes
// fib(n-2) itself and joins; below the cutoff it recurses serially.
//
//	fib [-n 32] [-cutoff 20]   QUICK=1 in the environment uses n=27.
//
// One untimed warm-up call, then the median of 9 timed calls (as
// bench/weft/fib.c).
//
// Output: go_fib_ms=<median wall ms of one call> n=<N> result=<fib(N)> gomaxprocs=<P>
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"sort"
	"time"
)

var cutoff int

func serial(n int) int {
	if n < 2 {
		return n
	}
	return serial(n-1) + serial(n-2)
}

func fib(n int) int {
	if n <= cutoff {
		return serial(n)
	}
	ch := make(chan int, 1)
	go func() { ch <- fib(n - 1) }()
	b := fib(n - 2)
	return <-ch + b
}

func main() {
	n := flag.Int("n", 32, "fib argument")
	flag.IntVar(&cutoff, "cutoff", 20, "spawn a goroutine only above this n")
	flag.Parse()
	if os.Getenv("QUICK") == "1" {
		*n = 27
	}

	want := serial(*n)
	r := fib(*n) // warm-up
	ms := make([]float64, 9)
	for i := range ms {
		t0 := time.Now()
		r = fib(*n)
		ms[i] = float64(time.Since(t0).Nanoseconds()) / 1e6
		if r != want {
			fmt.Fprintf(os.Stderr, "fib: got %d, want %d\n", r, want)
			os.Exit(1)
		}
	}
	sort.Float64s(ms)
	fmt.Printf("go_fib_ms=%.3f n=%d result=%d gomaxprocs=%d\n",
		ms[len(ms)/2], *n, r, runtime.GOMAXPROCS(0))
}
