package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lanes-qos/lanes/api/client"
	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/internal/procfs"
)

// childSource is the child: it sleeps childLife and exits, with no C
// library (raw system calls, nothing to map or start but its one page),
// so that its fork, exec and exit cost the machine as little as a process
// can: on 2 vCPUs the spawner makes ~2600 of these a second against
// ~1600 of a static glibc program (childLibcSource, --child libc), whose
// start-up (TLS, locale, stdio) is the spawner's cost, not lanesd's.
const childSource = `#if defined(__x86_64__)
static long sys2(long n, long a, long b) {
	long r;
	__asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b) : "rcx", "r11", "memory");
	return r;
}
#define SYS_nanosleep 35
#define SYS_exit 60
#elif defined(__aarch64__)
static long sys2(long n, long a, long b) {
	register long x8 __asm__("x8") = n, x0 __asm__("x0") = a, x1 __asm__("x1") = b;
	__asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1) : "memory");
	return x0;
}
#define SYS_nanosleep 101
#define SYS_exit 93
#else
#error "no raw system calls for this architecture: use --child libc"
#endif
struct ts { long s, ns; };
__attribute__((force_align_arg_pointer)) void _start(void) {
	struct ts t = {0, 200000000};
	sys2(SYS_nanosleep, (long)&t, 0);
	sys2(SYS_exit, 0, 0);
	for (;;) ;
}
`

// childLibcSource is the same child on the C library.
const childLibcSource = `#include <time.h>
int main(void) { struct timespec t = {0, 200000000}; nanosleep(&t, 0); return 0; }
`

// childLife is how long a child lives; checks are due before it exits.
const childLife = 200 * time.Millisecond

// checkSlack is how late a check may run and still count as on time.
const checkSlack = 2 * time.Millisecond

// thresholds are the times after exec at which a child's lane is checked;
// thresholds[bar] is the bar. The finer steps below it bound the
// placement latency's p99 (P99Bound).
var thresholds = []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond,
	50 * time.Millisecond, 100 * time.Millisecond, 150 * time.Millisecond}

const bar = 2

// Result is one storm's measurements.
type Result struct {
	Lanesd   string        `json:"lanesd"`
	Lane     string        `json:"lane"`
	Rate     float64       `json:"rate_target"`
	Duration time.Duration `json:"duration_ns"`
	Spawned  int           `json:"spawned"`
	// Achieved is the spawn rate reached (children per second).
	Achieved float64 `json:"rate_achieved"`
	// PlacedWithin[i] is the share of children in the lane at
	// thresholds[i] after their exec.
	PlacedWithin []float64 `json:"placed_within"`
	// PlacedStrict is PlacedWithin counting only checks that ran at most
	// checkSlack after they were due: a child found placed by a later
	// check may have been placed after the threshold.
	PlacedStrict []float64 `json:"placed_within_strict"`
	Thresholds   []string  `json:"thresholds"`
	// CheckLateP99 is how late the checker ran its checks (p99): a check
	// due at 20 ms ran at most this much later.
	CheckLateP99 time.Duration `json:"check_late_p99_ns"`
	// P99Bound is the first threshold by which 99 % of the children were
	// placed: the p99 of the placement latency is at most this (and more
	// than the threshold before it). Zero: not reached by the last check.
	P99Bound time.Duration `json:"placement_p99_bound_ns"`
	// LanesdCPU is lanesd's CPU time over the storm, as a share of one core.
	LanesdCPU float64 `json:"lanesd_cpu_core"`
	// CPUPerChild is lanesd's CPU time over the storm per child spawned.
	CPUPerChild time.Duration `json:"lanesd_cpu_per_child_ns"`
	// Ls is the wall time of `lanes ls`, run every 200 ms during the storm.
	LsN     int           `json:"ls_n"`
	LsP50   time.Duration `json:"ls_p50_ns"`
	LsP99   time.Duration `json:"ls_p99_ns"`
	LsMax   time.Duration `json:"ls_max_ns"`
	LsFails int           `json:"ls_failures"`
	// API is the latency of GET /v1/lanes itself (what lanes ls asks),
	// without starting the lanes binary, asked right after each lanes ls.
	APIP50 time.Duration `json:"api_lanes_p50_ns"`
	APIP99 time.Duration `json:"api_lanes_p99_ns"`
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "spawn" {
		os.Exit(spawnMain(os.Args[2:]))
	}
	fs := flag.NewFlagSet("storm", flag.ExitOnError)
	lanesd := fs.String("lanesd", "", "lanesd binary to measure (required)")
	lanes := fs.String("lanes", "", "lanes binary for `lanes ls` during the storm (required)")
	rate := fs.Float64("rate", 2000, "children spawned per second")
	dur := fs.Duration("duration", 20*time.Second, "how long the storm lasts")
	laneName := fs.String("lane", "normal", "the lane the rule puts children in (a background lane starves them of CPU while the machine is busy, and they pile up)")
	cpuprofile := fs.String("cpuprofile", "", "pass --cpuprofile FILE to lanesd (a lanesd without the flag fails to start)")
	keep := fs.Bool("keep", false, "keep the work directory (lanesd's log, config)")
	childKind := fs.String("child", "raw", "the child program: raw (no C library, the cheapest to spawn) or libc (a static glibc program, as before 2026-11-28)")
	fs.Parse(os.Args[1:])
	if *lanesd == "" || *lanes == "" {
		fmt.Fprintln(os.Stderr, "storm: --lanesd and --lanes are required")
		os.Exit(2)
	}
	if *rate <= 0 || *rate > 20000 || *dur <= 0 || *dur > 10*time.Minute {
		fmt.Fprintln(os.Stderr, "storm: --rate must be in (0, 20000] and --duration in (0, 10m]")
		os.Exit(2)
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "storm: run as root (lanesd needs it)")
		os.Exit(1)
	}
	if *childKind != "raw" && *childKind != "libc" {
		fmt.Fprintf(os.Stderr, "storm: --child %q: want raw or libc\n", *childKind)
		os.Exit(2)
	}
	if !validLaneName(*laneName) {
		fmt.Fprintf(os.Stderr, "storm: --lane %q: want a lane name (letters, digits, - and _)\n", *laneName)
		os.Exit(2)
	}
	res, err := run(*lanesd, *lanes, *laneName, *childKind, *rate, *dur, *cpuprofile, *keep)
	if err != nil {
		fmt.Fprintln(os.Stderr, "storm:", err)
		os.Exit(1)
	}
	b, _ := json.MarshalIndent(res, "", "  ")
	fmt.Println(string(b))
	var within []string
	for i, th := range res.Thresholds {
		within = append(within, fmt.Sprintf("%s %.2f%%", th, 100*res.PlacedWithin[i]))
	}
	p99 := "> " + res.Thresholds[len(res.Thresholds)-1]
	if res.P99Bound > 0 {
		p99 = "<= " + res.P99Bound.String()
	}
	fmt.Printf("storm %s: %d children at %.0f/s (target %.0f/s): placed within %s (strict %.2f within %s); placement p99 %s; checks late p99 %s; lanesd CPU %.1f%% of a core, %.0f us per child; lanes ls p50 %s p99 %s max %s (n=%d, %d failed); GET /v1/lanes p50 %s p99 %s\n",
		filepath.Base(res.Lanesd), res.Spawned, res.Achieved, res.Rate,
		strings.Join(within, ", "), 100*res.PlacedStrict[bar], res.Thresholds[bar], p99, res.CheckLateP99.Round(100*time.Microsecond),
		100*res.LanesdCPU, float64(res.CPUPerChild)/float64(time.Microsecond),
		res.LsP50.Round(time.Microsecond*100), res.LsP99.Round(time.Microsecond*100), res.LsMax.Round(time.Microsecond*100), res.LsN, res.LsFails,
		res.APIP50.Round(time.Microsecond*100), res.APIP99.Round(time.Microsecond*100))
}

// validLaneName accepts what can be a lane (and a cgroup) name.
func validLaneName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

func run(lanesd, lanes, laneName, childKind string, rate float64, dur time.Duration, cpuprofile string, keep bool) (*Result, error) {
	work, err := os.MkdirTemp("", "lanes-storm-")
	if err != nil {
		return nil, err
	}
	if !keep {
		defer os.RemoveAll(work)
	} else {
		fmt.Fprintln(os.Stderr, "storm: work directory", work)
	}
	child := filepath.Join(work, "stormchild")
	src := filepath.Join(work, "stormchild.c")
	code, flags := childSource, []string{"-O2", "-static", "-nostdlib", "-fno-stack-protector"}
	if childKind == "libc" {
		code, flags = childLibcSource, []string{"-O2", "-static"}
	}
	if err := os.WriteFile(src, []byte(code), 0o644); err != nil {
		return nil, err
	}
	if out, err := exec.Command("gcc", append(flags, "-o", child, src)...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build the child (gcc -static; apt-get install gcc libc6-dev): %v\n%s", err, out)
	}
	config := filepath.Join(work, "lanes.toml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf("[[rule]]\nexe = %q\nlane = %q\n", child, laneName)), 0o644); err != nil {
		return nil, err
	}
	socket := filepath.Join(work, "lanes.sock")
	logf, err := os.Create(filepath.Join(work, "lanesd.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	args := []string{"--config", config, "--socket", socket, "--state-dir", filepath.Join(work, "state")}
	if cpuprofile != "" {
		args = append(args, "--cpuprofile", cpuprofile)
	}
	d := exec.Command(lanesd, args...)
	d.Stdout, d.Stderr = logf, logf
	if err := d.Start(); err != nil {
		return nil, fmt.Errorf("start lanesd: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- d.Wait() }()
	defer func() {
		d.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(60 * time.Second):
			d.Process.Kill()
		}
	}()
	cl := client.New(socket)
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cl.Status(ctx)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("lanesd did not answer on %s: %v (log %s)", socket, err, logf.Name())
		}
		select {
		case err := <-exited:
			b, _ := os.ReadFile(logf.Name())
			return nil, fmt.Errorf("lanesd exited at start: %v\n%s", err, b)
		case <-time.After(50 * time.Millisecond):
		}
	}
	time.Sleep(time.Second) // let it settle

	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	sp := exec.Command(self, "spawn", "--child", child, "--lane", laneName, "--rate", fmt.Sprint(rate), "--duration", dur.String())
	sp.Stderr = os.Stderr
	out, err := sp.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cpu0, err := cpuTicks(d.Process.Pid)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	if err := sp.Start(); err != nil {
		return nil, err
	}
	// lanes ls every 200 ms while the storm lasts.
	lsDone := make(chan struct{})
	var ls, apiLat []time.Duration
	lsFails := 0
	go func() {
		defer close(lsDone)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		end := time.Now().Add(dur)
		for time.Now().Before(end) {
			<-tick.C
			s := time.Now()
			c := exec.Command(lanes, "--socket", socket, "ls")
			if err := c.Run(); err != nil {
				lsFails++
				continue
			}
			ls = append(ls, time.Since(s))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			s = time.Now()
			if _, err := cl.Lanes(ctx); err == nil {
				apiLat = append(apiLat, time.Since(s))
			}
			cancel()
		}
	}()
	var res Result
	if err := json.NewDecoder(bufio.NewReader(out)).Decode(&res); err != nil {
		return nil, fmt.Errorf("spawner's result: %w", err)
	}
	if err := sp.Wait(); err != nil {
		return nil, fmt.Errorf("spawner: %w", err)
	}
	wall := time.Since(t0)
	cpu1, err := cpuTicks(d.Process.Pid)
	if err != nil {
		return nil, err
	}
	<-lsDone
	res.Lanesd, res.Lane = lanesd, laneName
	res.LanesdCPU = float64(cpu1-cpu0) / procfs.UserHZ / wall.Seconds()
	if res.Spawned > 0 {
		res.CPUPerChild = time.Duration(float64(cpu1-cpu0) / procfs.UserHZ * float64(time.Second) / float64(res.Spawned))
	}
	slices.Sort(ls)
	slices.Sort(apiLat)
	if len(apiLat) > 0 {
		res.APIP50 = apiLat[len(apiLat)/2]
		res.APIP99 = apiLat[min(len(apiLat)-1, len(apiLat)*99/100)]
	}
	res.LsN, res.LsFails = len(ls), lsFails
	if len(ls) > 0 {
		res.LsP50 = ls[len(ls)/2]
		res.LsP99 = ls[min(len(ls)-1, len(ls)*99/100)]
		res.LsMax = ls[len(ls)-1]
	}
	return &res, nil
}

// cpuTicks is utime + stime of pid, in clock ticks.
func cpuTicks(pid int) (uint64, error) {
	s, err := procfs.ReadStat(pid)
	if err != nil {
		return 0, fmt.Errorf("lanesd's CPU time: %w", err)
	}
	return s.UTime + s.STime, nil
}

// check is one child waiting for its next lane check.
type check struct {
	pid   int
	exec  time.Time
	stage int
}

// spawnMain is the spawner, a process of its own so that reaping every
// child (wait4(-1)) takes none of the parent's (lanesd, lanes ls).
func spawnMain(args []string) int {
	fs := flag.NewFlagSet("storm spawn", flag.ExitOnError)
	child := fs.String("child", "", "program to spawn")
	rate := fs.Float64("rate", 2000, "children per second")
	dur := fs.Duration("duration", 20*time.Second, "storm length")
	laneName := fs.String("lane", "normal", "the lane children are placed in")
	fs.Parse(args)
	h, err := cgroup.Detect()
	if err != nil {
		fmt.Fprintln(os.Stderr, "storm spawn:", err)
		return 1
	}
	want := "/" + cgroup.Prefix + *laneName
	inLane := func(pid int) (bool, bool) {
		m, err := cgroup.ProcMembership(pid)
		if err != nil {
			return false, false
		}
		p, ok := m.V1[cgroup.CPU]
		if !ok || h.CPURoot == "" {
			p = m.V2
		}
		return p == want, true
	}
	// Reap every child.
	go func() {
		var ws syscall.WaitStatus
		for {
			if _, err := syscall.Wait4(-1, &ws, 0, nil); errors.Is(err, syscall.ECHILD) {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	queues := make([]chan check, len(thresholds))
	for i := range queues {
		queues[i] = make(chan check, int(*rate*5)+1024)
	}
	placed := make([]int, len(thresholds))
	strict := make([]int, len(thresholds))
	var late []time.Duration
	checked := make(chan struct{})
	var spawning atomic.Bool
	spawning.Store(true)
	go func() {
		defer close(checked)
		pending := make([]*check, len(queues))
		for {
			progress, busy := false, spawning.Load()
			for i, q := range queues {
				if pending[i] == nil {
					select {
					case c := <-q:
						pending[i] = &c
					default:
						continue
					}
				}
				busy = true
				c := pending[i]
				due := c.exec.Add(thresholds[i])
				now := time.Now()
				if now.Before(due) {
					continue
				}
				pending[i], progress = nil, true
				if i == bar {
					late = append(late, now.Sub(due))
				}
				ok, alive := inLane(c.pid)
				if ok {
					for j := i; j < len(thresholds); j++ {
						placed[j]++
						if now.Sub(c.exec) <= thresholds[j]+checkSlack {
							strict[j]++
						}
					}
					continue
				}
				if alive && i+1 < len(queues) {
					c.stage = i + 1
					queues[i+1] <- *c
				}
			}
			if !busy {
				return
			}
			if !progress {
				time.Sleep(200 * time.Microsecond)
			}
		}
	}()
	devnull, err := syscall.Open(os.DevNull, syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "storm spawn:", err)
		return 1
	}
	attr := &syscall.ProcAttr{Files: []uintptr{uintptr(devnull), uintptr(devnull), uintptr(devnull)}}
	argv := []string{*child}
	start := time.Now()
	n := 0
	for {
		el := time.Since(start)
		if el >= *dur {
			break
		}
		target := int(el.Seconds() * *rate)
		for n < target {
			pid, err := syscall.ForkExec(*child, argv, attr)
			if err != nil {
				fmt.Fprintln(os.Stderr, "storm spawn:", err)
				return 1
			}
			queues[0] <- check{pid: pid, exec: time.Now()}
			n++
		}
		time.Sleep(250 * time.Microsecond)
	}
	spawnTime := time.Since(start)
	spawning.Store(false)
	<-checked
	slices.Sort(late)
	res := Result{Rate: *rate, Duration: *dur, Spawned: n, Achieved: float64(n) / spawnTime.Seconds()}
	for i, th := range thresholds {
		res.Thresholds = append(res.Thresholds, th.String())
		res.PlacedWithin = append(res.PlacedWithin, float64(placed[i])/float64(max(n, 1)))
		res.PlacedStrict = append(res.PlacedStrict, float64(strict[i])/float64(max(n, 1)))
	}
	if len(late) > 0 {
		res.CheckLateP99 = late[len(late)*99/100]
	}
	for i, th := range thresholds {
		if res.PlacedWithin[i] >= 0.99 {
			res.P99Bound = th
			break
		}
	}
	json.NewEncoder(os.Stdout).Encode(res)
	return 0
}
