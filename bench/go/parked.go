// parked: creation time and memory of many blocked goroutines.
//
// Starts N goroutines that each block receiving from a channel, waits
// until all are running, and reports the creation time and the growth of
// VmRSS (from /proc/self/status) per goroutine.  Then releases them all.
//
//	parked [-n N]         QUICK=1 in the environment shrinks N.
//
// Output: go_parked_create_ns=<ns each> go_parked_rss_bytes=<bytes each> n=<N>
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// vmRSS returns the resident set size in KiB, or 0 if unreadable.
func vmRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "VmRSS:") {
			fields := strings.Fields(line)
			if len(fields) >= 2 {
				kib, _ := strconv.ParseInt(fields[1], 10, 64)
				return kib
			}
		}
	}
	return 0
}

func main() {
	n := flag.Int("n", 1000000, "goroutines to park")
	flag.Parse()
	if os.Getenv("QUICK") == "1" {
		*n = 100000
	}

	block := make(chan struct{})
	var started, done sync.WaitGroup
	runtime.GC()
	rss0 := vmRSS()
	t0 := time.Now()
	started.Add(*n)
	done.Add(*n)
	for i := 0; i < *n; i++ {
		go func() {
			started.Done()
			<-block
			done.Done()
		}()
	}
	started.Wait()
	el := time.Since(t0)
	rss1 := vmRSS()
	close(block)
	done.Wait()
	fmt.Printf("go_parked_create_ns=%.1f go_parked_rss_bytes=%.0f n=%d\n",
		float64(el.Nanoseconds())/float64(*n),
		float64((rss1-rss0)*1024)/float64(*n), *n)
}
