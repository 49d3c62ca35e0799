//go:build ignore

// sched measures, without a network, what a sender that works and sleeps
// gets of a CPU slowed as `lanes bench hotspot --slow-cpu 5` slows it
// (a SCHED_FIFO thread spinning for 95 % of every millisecond), beside
// busy loops at nice 0, at a nice and an EEVDF slice of its own:
//
//	go run sched.go -hogs 30 -nice -20 -slice 100us -work 20us -sleep 1ms -for 10s
//
// It prints the sender's cycles, its CPU time and its time waiting
// runnable (/proc/self/task/TID/schedstat), and the hogs' CPU time.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

func pin() {
	var set unix.CPUSet
	set.Set(0)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		panic(err)
	}
}

func schedstat(tid int) (run, wait time.Duration) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/schedstat", tid))
	if err != nil {
		panic(err)
	}
	var r, w, n int64
	fmt.Sscan(strings.TrimSpace(string(b)), &r, &w, &n)
	return time.Duration(r), time.Duration(w)
}

func spin(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}

func main() {
	hogs := flag.Int("hogs", 30, "busy loops at nice 0 on CPU 0")
	nice := flag.Int("nice", -20, "the sender's nice")
	slice := flag.Duration("slice", 0, "the sender's EEVDF slice (0: the kernel's default)")
	work := flag.Duration("work", 20*time.Microsecond, "the sender's work per cycle")
	sleep := flag.Duration("sleep", time.Millisecond, "the sender's sleep per cycle")
	dur := flag.Duration("for", 10*time.Second, "how long")
	pct := flag.Float64("slow", 5, "percent of CPU 0 left to the fair class (100: no spinner)")
	flag.Parse()
	// A P per thread: the hogs, the spinner and the sender are locked
	// to threads, and with fewer Ps the Go scheduler, not the kernel's,
	// would share them out.
	runtime.GOMAXPROCS(*hogs + 8)

	var quit atomic.Bool
	var wg sync.WaitGroup
	if *pct < 100 {
		busy := time.Duration(float64(time.Millisecond) * (100 - *pct) / 100)
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			pin()
			if err := unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: 1, Priority: 50}, 0); err != nil {
				panic(err)
			}
			for next := time.Now(); !quit.Load(); {
				for time.Since(next) < busy {
				}
				next = next.Add(time.Millisecond)
				if d := time.Until(next); d > 0 {
					unix.Nanosleep(&unix.Timespec{Nsec: int64(d)}, nil)
				}
			}
		}()
	}
	hogTids := make(chan int, *hogs)
	for range *hogs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			pin()
			hogTids <- unix.Gettid()
			for !quit.Load() {
				spin(100 * time.Microsecond)
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	type result struct {
		cycles    int
		run, wait time.Duration
		got       time.Duration
	}
	res := make(chan result)
	go func() {
		runtime.LockOSThread()
		pin()
		tid := unix.Gettid()
		at, err := unix.SchedGetAttr(tid, 0)
		if err != nil {
			panic(err)
		}
		at.Size, at.Nice, at.Runtime = unix.SizeofSchedAttr, int32(*nice), uint64(*slice)
		if err := unix.SchedSetAttr(tid, at, 0); err != nil {
			panic(err)
		}
		got, _ := unix.SchedGetAttr(tid, 0)
		r0, w0 := schedstat(tid)
		n := 0
		for end := time.Now().Add(*dur); time.Now().Before(end); n++ {
			// work counts CPU time, not wall time: a cycle's work is
			// done however often the thread is preempted.
			var ts0, ts unix.Timespec
			unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts0)
			for {
				unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
				if time.Duration(ts.Nano()-ts0.Nano()) >= *work {
					break
				}
			}
			unix.Nanosleep(&unix.Timespec{Nsec: int64(*sleep)}, nil)
		}
		r1, w1 := schedstat(tid)
		res <- result{n, r1 - r0, w1 - w0, time.Duration(got.Runtime)}
	}()
	r := <-res
	var hogRun time.Duration // since each hog started, 0.5 s before the sender
	close(hogTids)
	for tid := range hogTids {
		run, _ := schedstat(tid)
		hogRun += run
	}
	quit.Store(true)
	wg.Wait()
	fmt.Printf("hogs %d nice %d slice %v (kernel: %v): %d cycles in %v; sender ran %.3f s, waited runnable %.3f s; hogs ran %.3f s in all\n",
		*hogs, *nice, *slice, r.got, r.cycles, *dur, r.run.Seconds(), r.wait.Seconds(), hogRun.Seconds())
}
