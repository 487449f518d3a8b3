// chanbuf: producer -> consumer throughput over a buffered channel
// (capacity 128) with GOMAXPROCS=2.
//
//	chanbuf [-n N]        QUICK=1 in the environment shrinks N.
//
// Output: go_chanbuf_msgs_per_sec=<rate> n=<N>
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"time"
)

func main() {
	n := flag.Int("n", 20000000, "messages")
	flag.Parse()
	if os.Getenv("QUICK") == "1" {
		*n = 500000
	}
	runtime.GOMAXPROCS(2)

	ch := make(chan int, 128)
	done := make(chan int)
	go func() {
		sum := 0
		for v := range ch {
			sum += v
		}
		done <- sum
	}()
	t0 := time.Now()
	for i := 0; i < *n; i++ {
		ch <- i
	}
	close(ch)
	sum := <-done
	el := time.Since(t0)
	if want := (*n - 1) * *n / 2; sum != want {
		fmt.Fprintf(os.Stderr, "chanbuf: sum %d, want %d\n", sum, want)
		os.Exit(1)
	}
	fmt.Printf("go_chanbuf_msgs_per_sec=%.0f n=%d\n", float64(*n)/el.Seconds(), *n)
}
