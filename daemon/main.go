package daemon

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"strings"

	"github.com/lanes-qos/lanes/internal/buildinfo"
	"github.com/lanes-qos/lanes/internal/logging"
	"github.com/lanes-qos/lanes/internal/paths"
	"github.com/lanes-qos/lanes/reserve"
)

// Main is lanesd's command line: it parses args (without the program
// name) and runs the daemon or the cleanup, returning the exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lanesd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var opts Options
	cleanup := fs.Bool("cleanup", false, "remove what a crashed lanesd left (cgroups, moved processes) and exit")
	fs.StringVar(&opts.ConfigPath, "config", "", "config file (default "+paths.ConfigFile+" if it exists, else the embedded defaults)")
	fs.StringVar(&opts.Socket, "socket", "", "local API socket (default: the config's daemon.socket, "+paths.Socket+")")
	fs.StringVar(&opts.StateDir, "state-dir", "", "state directory (default: the config's daemon.state_dir, "+paths.StateDir+")")
	fs.StringVar(&opts.ReserveMechanism, "reserve-mechanism", reserve.MechAuto, "how cpu.reserve is enforced: auto (SCHED_DEADLINE where the kernel enforces it with HRTICK_DL, else CFS bandwidth), deadline, or cfs")
	fs.StringVar(&opts.ReserveTickAssist, "reserve-tick-assist", reserve.AssistAuto, "how finely a cpu.reserve under CFS bandwidth is charged: auto (every 1ms by a SCHED_FIFO thread per CPU, while a reserved lane uses its reservation, where the kernel's tick is coarser), off (at the kernel's tick), or a period from 100us to 10ms")
	fs.StringVar(&opts.MetricsCount, "metrics-count", MetricsCountAuto, "how a metrics scrape counts each lane's processes: auto (in the kernel by a BPF program where it loads, else cgroup.procs) or cgroup.procs")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile (pprof) to this file until lanesd stops")
	version := fs.Bool("version", false, "print lanesd's version and exit")
	logLevel := fs.String("log-level", "info", "least severe messages logged: debug, info, warn or error")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: lanesd [flags]

lanesd puts processes into lanes (interactive, normal, background, and the
lanes of the config) and schedules their CPU and disk accordingly. It runs as
root until SIGINT/SIGTERM, then restores the host as it found it. After a
crash, a new start adopts what the old one left (or removes it: --cleanup).
SIGHUP reloads the config; a bad file keeps the running one. Talk to it with
'lanes' (lanes status, lanes ls, lanes run, lanes move).

Under systemd (Type=notify) it reports ready, reloading and stopping, pets
the watchdog (WatchdogSec=) while it can still apply changes, and logs with
syslog priorities that the journal keeps; elsewhere it logs text lines with
their level to stderr.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "lanesd: unexpected argument %q (see lanesd --help)\n", fs.Arg(0))
		return 2
	}
	if *version {
		fmt.Fprintln(stdout, buildinfo.String("lanesd"))
		return 0
	}
	level, err := logging.ParseLevel(*logLevel)
	if err != nil {
		fmt.Fprintf(stderr, "lanesd: --log-level: %v\n", err)
		return 2
	}
	if _, _, err := reserve.Choose(opts.ReserveMechanism, reserve.Facts{}); err != nil {
		fmt.Fprintf(stderr, "lanesd: --reserve-mechanism: %v\n", err)
		return 2
	}
	if _, _, err := reserve.Assist(opts.ReserveTickAssist, 0); err != nil {
		fmt.Fprintf(stderr, "lanesd: --reserve-tick-assist: %v\n", err)
		return 2
	}
	if opts.MetricsCount != MetricsCountAuto && opts.MetricsCount != MetricsCountProcs {
		fmt.Fprintf(stderr, "lanesd: --metrics-count: %q is neither %s nor %s\n", opts.MetricsCount, MetricsCountAuto, MetricsCountProcs)
		return 2
	}
	gc := tuneGC()
	f, _ := stderr.(*os.File)
	logger := logging.New(stderr, level, f != nil && logging.ToJournal(f))
	opts.Logf = logging.Printf(logger, slog.LevelInfo)
	opts.Warnf = logging.Printf(logger, slog.LevelWarn)
	if level <= slog.LevelDebug {
		opts.Debugf = logging.Printf(logger, slog.LevelDebug)
	}
	if gc != "" {
		opts.Logf("garbage collector: %s", gc)
	}
	fail := logging.Printf(logger, slog.LevelError)
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fail("cpu profile: %v", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fail("cpu profile %s: %v", *cpuprofile, err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	if *cleanup {
		err = Cleanup(opts)
	} else {
		err = Run(context.Background(), opts)
	}
	if err != nil {
		fail("%v", err)
		return 1
	}
	return 0
}

// The garbage collector's settings lanesd takes where its environment
// sets none: a collection when the heap has grown by four times what was
// live (GOGC=400, not Go's 100), within a soft limit of 256 MiB. lanesd's
// live heap is a few MB, so Go's default collected every few MB of
// allocation: 23 times in 500 metrics scrapes of an idle lanesd (5 with
// these settings), and about a fifth of a scrape's CPU went to it
// (docs/BENCHMARKS.md, "Metrics: the cost of a scrape"). The limit keeps
// the heap bounded if what is live grows large.
const (
	gcPercent   = 400
	gcSoftLimit = 256 << 20
)

// tuneGC applies gcPercent and gcSoftLimit where GOGC and GOMEMLIMIT are
// not set, and says what it set ("" for nothing).
func tuneGC() string {
	var set []string
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
		set = append(set, fmt.Sprintf("GOGC=%d", gcPercent))
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(gcSoftLimit)
		set = append(set, fmt.Sprintf("GOMEMLIMIT=%dMiB", gcSoftLimit>>20))
	}
	if len(set) == 0 {
		return ""
	}
	return strings.Join(set, ", ") + " (lanesd's defaults; the environment's GOGC and GOMEMLIMIT win)"
}
