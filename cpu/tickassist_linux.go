package cpu

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-qos/lanes/internal/procfs"
	"github.com/lanes-qos/lanes/internal/rtthread"
)

// TickAssistPriority is the tick assist's SCHED_FIFO priority: the
// lowest, enough to preempt every CFS thread and below any real-time
// work.
const TickAssistPriority = 1

// TickAssist holds CFS bandwidth quotas to a finer grain than the
// kernel's tick (reserve.Assist says why and when): a thread on each CPU
// it is given, pinned there under SCHED_FIFO, that wakes every period and
// sleeps again at once. Each wake preempts the CFS thread running on that
// CPU; the kernel charges that thread's groups the CPU they used on the
// way out and throttles a group whose quota is spent. The threads end
// with Set (for CPUs left out) and Stop, or with the process, taking
// their policy with them.
type TickAssist struct {
	every time.Duration

	mu    sync.Mutex
	on    map[int]*assistThread // by CPU
	spent time.Duration         // CPU of the threads already stopped
}

type assistThread struct {
	tid  int
	stop atomic.Bool
	done chan struct{}
}

// NewTickAssist returns an assist waking every period, on no CPU yet.
func NewTickAssist(every time.Duration) (*TickAssist, error) {
	if every <= 0 {
		return nil, fmt.Errorf("tick assist: period %v", every)
	}
	return &TickAssist{every: every, on: map[int]*assistThread{}}, nil
}

// Set runs the assist on exactly cpus (CPU numbers): it starts a thread
// on each new CPU and stops those on CPUs left out. A CPU whose thread
// cannot start (SCHED_FIFO or the CPU refused) is left out, and the
// errors are returned together.
func (t *TickAssist) Set(cpus []int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	want := map[int]bool{}
	for _, c := range cpus {
		want[c] = true
	}
	for c, th := range t.on {
		if !want[c] {
			t.stopThread(th)
			delete(t.on, c)
		}
	}
	var errs []error
	for c := range want {
		if t.on[c] != nil {
			continue
		}
		th, err := t.start(c)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		t.on[c] = th
	}
	return errors.Join(errs...)
}

// start starts the thread on CPU c and returns once it runs there.
func (t *TickAssist) start(c int) (*assistThread, error) {
	th := &assistThread{done: make(chan struct{})}
	ready := make(chan error, 1)
	go func() {
		defer close(th.done)
		started := false
		err := rtthread.Run(TickAssistPriority, func(sleepUntil func(time.Time)) error {
			var set unix.CPUSet
			set.Set(c)
			if err := unix.SchedSetaffinity(0, &set); err != nil {
				return fmt.Errorf("CPU %d: %w", c, err)
			}
			th.tid = unix.Gettid()
			started = true
			ready <- nil
			next := time.Now()
			for !th.stop.Load() {
				next = next.Add(t.every)
				if now := time.Now(); now.Sub(next) > t.every {
					next = now.Add(t.every) // fell behind (a higher priority ran): no catching up
				}
				sleepUntil(next)
			}
			return nil
		})
		if !started {
			ready <- fmt.Errorf("tick assist on CPU %d: %w", c, err)
		}
	}()
	if err := <-ready; err != nil {
		<-th.done
		return nil, err
	}
	return th, nil
}

// stopThread ends th and waits for it (at most a period), keeping the CPU
// it used. Callers hold t.mu.
func (t *TickAssist) stopThread(th *assistThread) {
	if st, err := procfs.ReadSchedstat(th.tid); err == nil {
		t.spent += st.Run
	}
	th.stop.Store(true)
	<-th.done
}

// CPUs are the CPUs the assist runs on now, in order.
func (t *TickAssist) CPUs() []int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Sorted(maps.Keys(t.on))
}

// Threads are the assist's thread IDs by CPU.
func (t *TickAssist) Threads() map[int]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[int]int, len(t.on))
	for c, th := range t.on {
		out[c] = th.tid
	}
	return out
}

// CPUTime is the CPU the assist's threads have used so far, those
// stopped included: its cost.
func (t *TickAssist) CPUTime() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	sum := t.spent
	for _, th := range t.on {
		if st, err := procfs.ReadSchedstat(th.tid); err == nil {
			sum += st.Run
		}
	}
	return sum
}

// Stop ends every thread of the assist and waits for them.
func (t *TickAssist) Stop() {
	t.Set(nil)
}
