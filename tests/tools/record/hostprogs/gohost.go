// A Go program for tests/tools/record/host_safety_test.cc, built twice:
// with cgo (it imports net, so it links against libc, as most Go programs
// on glibc do) and statically. Goroutines hash in parallel; it prints
// what it computed.
package main

import (
	"crypto/sha256"
	"fmt"
	"net"
	"sync"
)

func main() {
	ip := net.ParseIP("127.0.0.1")
	var wg sync.WaitGroup
	sums := make([][]byte, 4)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			h := sha256.New()
			buf := make([]byte, 1<<20)
			buf[0] = byte(g)
			for i := 0; i < 60; i++ {
				h.Write(buf)
			}
			sums[g] = h.Sum(nil)
		}(g)
	}
	wg.Wait()
	fmt.Printf("%s %x %x\n", ip, sums[0][:4], sums[3][:4])
}
