//go:build ignore

// slice gives every thread of the named processes an EEVDF slice of the
// given length in nanoseconds (sched_setattr's sched_runtime on a
// SCHED_NORMAL thread, Linux 6.12 and later), keeping its policy and
// nice, and prints what the kernel reports back:
//
//	go run slice.go 100000 PID...
package main

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: go run slice.go NANOSECONDS PID...")
		os.Exit(2)
	}
	slice, err := strconv.ParseUint(os.Args[1], 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "slice:", err)
		os.Exit(2)
	}
	for _, a := range os.Args[2:] {
		pid, err := strconv.Atoi(a)
		if err != nil {
			fmt.Fprintln(os.Stderr, "pid:", err)
			continue
		}
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			continue
		}
		for _, e := range ents {
			tid, _ := strconv.Atoi(e.Name())
			at, err := unix.SchedGetAttr(tid, 0)
			if err != nil {
				fmt.Fprintln(os.Stderr, "get", tid, err)
				continue
			}
			at.Size, at.Runtime = unix.SizeofSchedAttr, slice
			if err := unix.SchedSetAttr(tid, at, 0); err != nil {
				fmt.Fprintln(os.Stderr, "set", tid, err)
				continue
			}
			got, err := unix.SchedGetAttr(tid, 0)
			if err != nil {
				continue
			}
			fmt.Printf("tid %d policy %d nice %d slice %d ns\n", tid, got.Policy, got.Nice, got.Runtime)
		}
	}
}
