// sleep: CPU cost of timer wakeups.
//
// G goroutines (default 100,000) each sleep 10 ms in a loop for D
// seconds.  Reports process CPU time (getrusage, user+system) per wakeup.
//
//	sleep [-g G] [-d SECONDS] [-ms SLEEP_MS]   QUICK=1 shortens D.
//
// Output: go_sleep_cpu_us_per_wakeup=<us> wakeups=<N> goroutines=<G> secs=<D>
package main

import (
	"flag"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func main() {
	g := flag.Int("g", 100000, "goroutines")
	d := flag.Float64("d", 5, "seconds to run")
	ms := flag.Int("ms", 10, "sleep per iteration, ms")
	flag.Parse()
	if os.Getenv("QUICK") == "1" {
		*d = 0.5
	}

	var wakeups int64
	var wg sync.WaitGroup
	nap := time.Duration(*ms) * time.Millisecond
	cpu0 := cpuTime()
	t0 := time.Now()
	deadline := t0.Add(time.Duration(*d * float64(time.Second)))
	wg.Add(*g)
	for i := 0; i < *g; i++ {
		go func() {
			defer wg.Done()
			var k int64
			for time.Now().Before(deadline) {
				time.Sleep(nap)
				k++
			}
			atomic.AddInt64(&wakeups, k)
		}()
	}
	wg.Wait()
	el := time.Since(t0)
	cpu := cpuTime() - cpu0
	w := atomic.LoadInt64(&wakeups)
	per := 0.0
	if w > 0 {
		per = float64(cpu.Nanoseconds()) / 1e3 / float64(w)
	}
	fmt.Printf("go_sleep_cpu_us_per_wakeup=%.3f wakeups=%d goroutines=%d secs=%.2f cpu_secs=%.2f\n",
		per, w, *g, el.Seconds(), cpu.Seconds())
}
