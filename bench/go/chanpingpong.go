// chanpingpong: round trip over two unbuffered channels on one P.
//
//	chanpingpong [-n N]   QUICK=1 in the environment shrinks N.
//
// Output: go_chan_pingpong_ns=<ns per round trip> n=<N>
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"time"
)

func main() {
	n := flag.Int("n", 5000000, "round trips")
	flag.Parse()
	if os.Getenv("QUICK") == "1" {
		*n = 200000
	}
	runtime.GOMAXPROCS(1)

	ping := make(chan int)
	pong := make(chan int)
	go func() {
		for v := range ping {
			pong <- v
		}
		close(pong)
	}()
	t0 := time.Now()
	for i := 0; i < *n; i++ {
		ping <- i
		<-pong
	}
	el := time.Since(t0)
	close(ping)
	<-pong
	fmt.Printf("go_chan_pingpong_ns=%.1f n=%d\n",
		float64(el.Nanoseconds())/float64(*n), *n)
}
