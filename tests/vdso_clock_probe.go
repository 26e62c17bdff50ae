// The vDSO clock tests' target: a Go program, as etcd is (Go reads the time through the vDSO).
// Each line read on stdin is answered with the wall clock (ns since the epoch) and the
// monotonic time since the program started (ns), both as Go's runtime reads them. With an
// argument N, N goroutines read the clock in a loop meanwhile, so that threads are inside the
// vDSO when it is patched.
package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"time"
)

var sink int64

func main() {
	start := time.Now()
	if len(os.Args) > 1 {
		n, _ := strconv.Atoi(os.Args[1])
		for i := 0; i < n; i++ {
			go func() {
				for {
					sink += time.Now().UnixNano() & 1
				}
			}()
		}
	}
	in := bufio.NewScanner(os.Stdin)
	fmt.Println("ready")
	for in.Scan() {
		now := time.Now()
		fmt.Printf("%d %d\n", now.UnixNano(), now.Sub(start).Nanoseconds())
	}
}
