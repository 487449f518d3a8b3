// echo: goroutine-per-connection TCP echo server, the Go peer for the
// echo benchmarks.
//
//	echo [PORT]           0, the default, picks an ephemeral port.
//
// Prints "listening on PORT" once ready, then serves until killed.
package main

import (
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

func serve(c net.Conn) {
	defer c.Close()
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			// Write always writes everything or fails.
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func main() {
	port := "0"
	if len(os.Args) > 1 {
		port = os.Args[1]
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		fmt.Fprintln(os.Stderr, "echo:", err)
		os.Exit(1)
	}
	addr := ln.Addr().String()
	fmt.Printf("listening on %s\n", addr[strings.LastIndex(addr, ":")+1:])
	for {
		c, err := ln.Accept()
		if err != nil {
			// Out of fds or similar: back off instead of spinning.
			time.Sleep(time.Millisecond)
			continue
		}
		go serve(c)
	}
}
