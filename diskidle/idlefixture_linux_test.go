package diskidle

import (
	"context"
	"fmt"
	"github.com/lanes-qos/lanes/disk"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/lanes-qos/lanes/idletime"
	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/internal/testutil"
)

// loopDev is a file-backed loop device with direct I/O to its file (so the
// page cache does not absorb the reads), removed with its file at cleanup.
type loopDev struct {
	path string // /dev/loopN
	name string // loopN
	size int64
}

// newLoop creates a file of sizeMiB filled with data (reads of holes or
// unwritten extents would not reach the disk) and a loop device on it.
func newLoop(tb testing.TB, sizeMiB int) *loopDev {
	tb.Helper()
	if _, err := exec.LookPath("losetup"); err != nil {
		tb.Fatalf("losetup: %v", err)
	}
	file := filepath.Join(tb.TempDir(), "disk.img")
	f, err := os.Create(file)
	if err != nil {
		tb.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i*7 + 1)
	}
	for i := 0; i < sizeMiB; i++ {
		buf[0] = byte(i)
		if _, err := f.Write(buf); err != nil {
			f.Close()
			tb.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		tb.Fatal(err)
	}
	f.Close()
	out, err := exec.Command("losetup", "--direct-io=on", "--show", "-f", file).CombinedOutput()
	if err != nil && strings.Contains(string(out), "unrecognized option") {
		// busybox losetup (the kernel-matrix guests) has neither --show
		// nor --direct-io: no direct I/O to the backing file, which changes
		// speeds but not what the gates do.
		out, err = attachLoop(file)
	}
	if err != nil {
		tb.Fatalf("losetup: %v: %s", err, out)
	}
	l := &loopDev{path: strings.TrimSpace(string(out)), size: int64(sizeMiB) << 20}
	l.name = filepath.Base(l.path)
	tb.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", l.path).CombinedOutput(); err != nil {
			tb.Errorf("losetup -d %s: %v: %s", l.path, err, out)
		}
	})
	return l
}

// setScheduler selects the device's I/O scheduler, failing the test when
// the device does not offer it.
func (l *loopDev) setScheduler(tb testing.TB, sched string) {
	tb.Helper()
	p := filepath.Join("/sys/block", l.name, "queue", "scheduler")
	if err := os.WriteFile(p, []byte(sched), 0); err != nil {
		tb.Fatalf("select %s on %s: %v", sched, l.name, err)
	}
	b, _ := os.ReadFile(p)
	if disk.ActiveScheduler(string(b)) != sched {
		tb.Fatalf("%s: scheduler %q after selecting %s", l.name, strings.TrimSpace(string(b)), sched)
	}
}

// sectorsRead is the device's completed read sectors (512 B) so far.
func (l *loopDev) sectorsRead(tb testing.TB) int64 {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("/sys/block", l.name, "stat"))
	if err != nil {
		tb.Fatal(err)
	}
	f := strings.Fields(string(b))
	n, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// bgGroup creates a unique group at the top of every
// hierarchy and removes it at cleanup. v1 is its blkio directory ("" on a
// unified host), v2 its cgroup v2 directory.
type bgGroup struct {
	g      cgroup.Group
	v1, v2 string
}

func newBgGroup(tb testing.TB) bgGroup {
	tb.Helper()
	h, err := cgroup.Detect()
	if err != nil {
		tb.Fatal(err)
	}
	// Not "lanes-…": daemon and enforcer tests running in parallel remove
	// every lanes-* group they do not know.
	g := h.Group(testutil.UniqueName("ltdisk"))
	if _, err := g.Create(); err != nil {
		tb.Fatal(err)
	}
	b := bgGroup{g: g, v2: g.V2Path()}
	if h.BlkioRoot != "" {
		b.v1, _ = g.Dir(cgroup.Blkio)
	}
	tb.Cleanup(func() {
		// A killed process cannot exit while its I/O is held: lift any
		// hold still in place (cleanups run in reverse order, the gates'
		// may come later).
		deadline := time.Now().Add(10 * time.Second)
		for g.Remove() != nil && time.Now().Before(deadline) {
			ClearIdleHolds(b.v1, b.v2)
			// fio runs its jobs in child processes: kill whatever is left.
			if pids, err := g.Procs(); err == nil {
				for _, pid := range pids {
					unix.Kill(pid, unix.SIGKILL)
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err := g.Remove(); err != nil {
			tb.Errorf("group %s left behind: %v", g.Name(), err)
		}
	})
	return b
}

// start runs argv in the group (every hierarchy) and kills it at cleanup.
// dirs nil runs it where the test runs.
func startIn(tb testing.TB, dirs []string, argv ...string) *exec.Cmd {
	tb.Helper()
	script := `for d in $LANES_DIRS; do echo $$ > "$d/cgroup.procs" || exit 97; done; exec "$@"`
	cmd := exec.Command("sh", append([]string{"-c", script, "sh"}, argv...)...)
	cmd.Env = append(os.Environ(), "LANES_DIRS="+strings.Join(dirs, " "))
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}

// stop ends a process started by startIn and waits for it.
func stop(cmd *exec.Cmd) {
	cmd.Process.Signal(unix.SIGTERM)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

// bgReader is the background load: fio, sequential direct reads of the
// device's second half, for dur.
func bgReader(l *loopDev, dur time.Duration, extra ...string) []string {
	argv := []string{"fio", "--name=bg", "--filename=" + l.path, "--direct=1", "--rw=read",
		"--bs=128k", "--ioengine=libaio", "--iodepth=4",
		"--offset=" + strconv.FormatInt(l.size/2, 10), "--size=" + strconv.FormatInt(l.size/2, 10),
		"--time_based", fmt.Sprintf("--runtime=%dms", dur.Milliseconds()), "--output=/dev/null"}
	return append(argv, extra...)
}

// directReader does 4 KiB O_DIRECT random reads of the device's first half
// from the calling thread (the test's cgroup: foreground).
type directReader struct {
	fd   int
	buf  []byte
	span int64
	rng  *rand.Rand
}

func newDirectReader(tb testing.TB, l *loopDev) *directReader {
	tb.Helper()
	fd, err := unix.Open(l.path, unix.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { unix.Close(fd) })
	raw := make([]byte, 8192)
	off := int(4096 - uintptr(unsafe.Pointer(&raw[0]))%4096)
	return &directReader{fd: fd, buf: raw[off : off+4096], span: l.size / 2 / 4096, rng: rand.New(rand.NewPCG(1, 2))}
}

func (r *directReader) read() error {
	_, err := unix.Pread(r.fd, r.buf, r.rng.Int64N(r.span)*4096)
	return err
}

// dutyCycle reads back to back for the first intensity share of every
// period and sleeps for the rest, until ctx ends; it returns the reads
// done. This is the paper's foreground "intensity": the share of time the
// foreground spends generating requests.
func (r *directReader) dutyCycle(ctx context.Context, intensity float64, period time.Duration) (int, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	n := 0
	start := time.Now()
	on := time.Duration(intensity * float64(period))
	for ctx.Err() == nil {
		el := time.Since(start)
		phase := el % period
		if phase >= on {
			select {
			case <-ctx.Done():
			case <-time.After(period - phase):
			}
			continue
		}
		if err := r.read(); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// monoNow is CLOCK_MONOTONIC, the clock of the kernel's stamps.
func monoNow() idletime.Mono {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return idletime.Mono(ts.Nano())
}

// piStats is what drivePI did.
type piStats struct {
	holds    int
	reaction []time.Duration // kernel event -> Hold done
	deliver  []time.Duration // kernel event -> event received here
	held     time.Duration
}

// drivePI is a stand-in for idletime's Controller on one gate: Hold on
// every foreground event, Release once pi has passed since the last
// foreground bio (the paper's PI, restarted by each foreground request),
// until ctx ends; then Release.
func drivePI(ctx context.Context, g idletime.Gate, events <-chan idletime.Event, pi time.Duration) (piStats, error) {
	var st piStats
	var at idletime.Mono
	for {
		select {
		case <-ctx.Done():
			return st, g.Release()
		case ev, ok := <-events:
			if !ok {
				return st, nil
			}
			at = ev.At
			st.deliver = append(st.deliver, time.Duration(monoNow()-at))
		}
		if err := g.Hold(); err != nil {
			return st, err
		}
		held := monoNow()
		st.holds++
		st.reaction = append(st.reaction, time.Duration(held-at))
		for {
			last, err := g.LastForeground()
			if err != nil {
				return st, err
			}
			rem := time.Duration(last) + pi - time.Duration(monoNow())
			if rem <= 0 {
				break
			}
			select {
			case <-ctx.Done():
				st.held += time.Duration(monoNow() - held)
				return st, g.Release()
			case <-time.After(rem):
			}
		}
		if err := g.Release(); err != nil {
			return st, err
		}
		st.held += time.Duration(monoNow() - held)
	}
}

// attachLoop attaches file to the first free loop device the busybox way
// ("losetup -f" names it, "losetup DEV FILE" attaches) and returns the
// device's path.
func attachLoop(file string) ([]byte, error) {
	out, err := exec.Command("losetup", "-f").CombinedOutput()
	if err != nil {
		return out, err
	}
	dev := strings.TrimSpace(string(out))
	if out, err := exec.Command("losetup", dev, file).CombinedOutput(); err != nil {
		return out, err
	}
	return []byte(dev), nil
}
