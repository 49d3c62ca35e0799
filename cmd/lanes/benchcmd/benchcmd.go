package benchcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/lanes-qos/lanes/bench"
	"github.com/lanes-qos/lanes/bench/ch5"
	"github.com/lanes-qos/lanes/bench/coord"
	"github.com/lanes-qos/lanes/bench/execspeed"
	"github.com/lanes-qos/lanes/bench/hotspot"
	"github.com/lanes-qos/lanes/bench/multinet"
	"github.com/lanes-qos/lanes/testbed/workload"
)

// New returns the `lanes bench` command.
func New() *cobra.Command {
	var opts bench.Options
	var sweep, verbose bool
	var rewrite string
	cmd := &cobra.Command{
		Use:   "bench [flags] SCENARIO.toml",
		Short: "Run a network benchmark scenario with its arms side by side (root)",
		Long: `Run a benchmark scenario: build the testbed (network namespaces with
addresses from 198.18.0.0/15, the user-space link emulator), measure the
reference phases (idle link, foreground alone, background alone) and every arm
(no lanes, hand-tuned baseline, lanes), interleaved and repeated, and write
<name>.json, <name>.md and <name>.svg with the ratios: foreground kept,
background's share of the leftover capacity, interactive latency against the
idle link. Scenarios: bench/scenarios/. Needs root, iperf3, irtt and ethtool.

The veths keep the kernel's segmentation offloads (on) unless a variant says
offloads = "off"; --cc and --offloads run every variant once per congestion
control and offload setting, as a scenario's [axes] does.

--sweep removes namespaces and devices a crashed run left. --rewrite FILE.json
reports the measurements of an earlier run again (e.g. with a newer report).
With LANES_IRTT_DUMP=DIR in the environment, every irtt run's full output (each
probe's round trip and timestamps) is kept in DIR, for latency over time.`,
		Example: `  sudo lanes bench bench/scenarios/s1.toml
  sudo lanes bench --repeats 1 --duration 8s --out /tmp/s1 bench/scenarios/s1.toml
  sudo lanes bench --repeats 3 --intensity 10,50,90 --pi 0,2ms,auto bench/scenarios/s3-idle-rr.toml
  sudo lanes bench --cc cubic,bbr --offloads on,off bench/scenarios/lone-up.toml
  sudo lanes bench --sweep`,
		RunE: func(cmd *cobra.Command, args []string) error {
			logf := func(string, ...any) {}
			if verbose {
				logf = func(f string, a ...any) { fmt.Fprintf(os.Stderr, "bench: "+f+"\n", a...) }
			}
			if rewrite != "" {
				if len(args) > 1 {
					return fmt.Errorf("bench --rewrite takes at most the scenario")
				}
				scenario := ""
				if len(args) == 1 {
					scenario = args[0]
				}
				files, err := bench.Rewrite(rewrite, scenario, opts.OutDir)
				if err != nil {
					return fmt.Errorf("bench: %w", err)
				}
				fmt.Fprintf(os.Stderr, "bench: wrote %s\n", strings.Join(files, ", "))
				return nil
			}
			if sweep {
				if len(args) > 0 {
					return fmt.Errorf("bench --sweep takes no scenario")
				}
				return bench.Sweep(logf)
			}
			if len(args) != 1 {
				return fmt.Errorf("bench: give one scenario file (e.g. bench/scenarios/s1.toml)")
			}
			if os.Geteuid() != 0 {
				return fmt.Errorf("bench: needs root (it creates network namespaces and qdiscs)")
			}
			opts.Scenario = args[0]
			if opts.LanesBin == "" {
				self, err := os.Executable()
				if err != nil {
					return fmt.Errorf("bench: find the lanes binary: %w", err)
				}
				opts.LanesBin = self
			}
			opts.Progress = os.Stderr
			opts.Logf = logf
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			start := time.Now()
			if err := bench.Run(ctx, opts); err != nil {
				return fmt.Errorf("bench: %w", err)
			}
			fmt.Fprintf(os.Stderr, "bench: done in %s; results in %s\n", time.Since(start).Round(time.Second), opts.OutDir)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.OutDir, "out", ".", "directory for the JSON, markdown and SVG results")
	f.IntVar(&opts.Repeats, "repeats", 0, "repeat each arm this many times (default: the scenario's)")
	f.StringSliceVar(&opts.Arms, "arm", nil, "run only these arms (repeatable; default all)")
	f.DurationVar(&opts.Duration, "duration", 0, "length of each measured phase (default: the scenario's)")
	f.Float64SliceVar(&opts.Intensities, "intensity", nil, "matrix scenarios: run only these foreground intensities, in percent (default: the scenario's)")
	f.StringSliceVar(&opts.PIs, "pi", nil, "matrix scenarios: run the PI-sweeping arms at these PIs (default: the scenario's)")
	f.StringSliceVar(&opts.CC, "cc", nil, "run every variant once per TCP congestion control, e.g. cubic,bbr (default for the host's: default; default: the scenario's [axes] cc, or each workload's own)")
	f.StringSliceVar(&opts.Offloads, "offloads", nil, "run every variant with the veths' segmentation offloads on (the kernel's defaults) and/or off: on,off (default: the scenario's [axes] offloads, or on)")
	f.StringVar(&opts.LanesBin, "lanes", "", "lanes binary for the lanes arm ($LANES; default this binary)")
	f.BoolVar(&sweep, "sweep", false, "remove leftovers of a crashed run and exit")
	f.StringVar(&rewrite, "rewrite", "", "summarize a results `JSON` file again and rewrite its JSON, markdown and SVG into --out (no run)")
	f.BoolVarP(&verbose, "verbose", "v", false, "log every command")
	cmd.AddCommand(genCommand(), ch5Command(), ch5VideoCommand(), hotspotCommand(), hotspotAudioCommand(), execspeedCommand(), execspeedProcCommand(), coordCommand(), multinetCommand())
	return cmd
}

// genCommand is the hidden `lanes bench gen REQUEST`: a workload
// generator process that the runner starts in a namespace (under `lanes
// run` when the arm puts the workload in a lane). REQUEST is a
// workload.GenRequest as JSON; the sender's counts are printed as JSON.
func genCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "gen REQUEST",
		Short:  "Run one workload sender of a benchmark (started by the runner)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := workload.GenMain(ctx, args[0], cmd.OutOrStdout()); err != nil {
				return fmt.Errorf("bench gen: %w", err)
			}
			return nil
		},
	}
}

// ch5Command is `lanes bench ch5`: seed 004's chapter-5 experiment.
func ch5Command() *cobra.Command {
	var opts ch5.Options
	var verbose bool
	cmd := &cobra.Command{
		Use:   "ch5 [flags]",
		Short: "Run seed 004's chapter-5 experiment: a 20 fps video under CPU contention and a greedy flow, four arms (root)",
		Long: `Run the chapter-5 experiment of seed 004 (Q-Fabric): a video-like stream
with real per-frame CPU work (block transform + DEFLATE, cost proportional to its
quality 1..100) from one network namespace to another over the emulated link, at
20 fps; from --contention on, stress-ng --cpu N on both ends and a greedy TCP
flow over the link. Arms: none (no management), app (the application adapts
its quality from the receiver's feedback), rm (lanesd controls the video lane's
CPU and network from the receiver's fps report), integrated (one lanesd
controller moves CPU, network and the application's quality together). The
arms' lanesd configs are in --configs (bench/ch5). Writes ch5.json, ch5.md and
ch5.svg into --out. Needs root, stress-ng, iperf3 and lanesd beside lanes.`,
		Example: `  sudo lanes bench ch5 --out bench/results/ch5
  sudo lanes bench ch5 --arm none,integrated --duration 30s --contention 5s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if os.Geteuid() != 0 {
				return fmt.Errorf("bench ch5: needs root (network namespaces, cgroups, qdiscs)")
			}
			if opts.LanesBin == "" {
				self, err := os.Executable()
				if err != nil {
					return fmt.Errorf("bench ch5: find the lanes binary: %w", err)
				}
				opts.LanesBin = self
			}
			opts.Progress = os.Stderr
			if verbose {
				opts.Logf = func(f string, a ...any) { fmt.Fprintf(os.Stderr, "ch5: "+f+"\n", a...) }
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if _, err := ch5.Run(ctx, opts); err != nil {
				return fmt.Errorf("bench %w", err)
			}
			fmt.Fprintf(os.Stderr, "bench ch5: results in %s\n", opts.OutDir)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.OutDir, "out", ".", "directory for ch5.json, ch5.md and ch5.svg")
	f.StringSliceVar(&opts.Arms, "arm", nil, "run only these arms: none, app, rm, integrated (default all)")
	f.DurationVar(&opts.Duration, "duration", 60*time.Second, "length of each arm")
	f.DurationVar(&opts.Contention, "contention", 10*time.Second, "when stress-ng and the greedy flow start")
	f.IntVar(&opts.StressCPU, "stress-cpu", 2, "stress-ng --cpu workers on each end")
	f.Uint64Var(&opts.LinkRate, "rate", 10_000_000, "link rate each way, bit/s")
	f.DurationVar(&opts.Delay, "delay", 10*time.Millisecond, "one-way link delay")
	f.IntVar(&opts.Queue, "queue", 100, "link queue, packets")
	f.StringVar(&opts.ConfigDir, "configs", "bench/ch5", "directory of the arms' lanesd configs (rm.toml, integrated.toml)")
	f.StringVar(&opts.LanesdBin, "lanesd", "", "lanesd binary (default: lanesd beside this binary)")
	f.BoolVarP(&verbose, "verbose", "v", false, "log the testbed's steps")
	return cmd
}

// hotspotAudioCommand is the hidden `lanes bench hotspotaudio CONFIG`:
// the audio sender of `lanes bench hotspot --audio`, started by the runner
// in the boosted lane.
func hotspotAudioCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "hotspotaudio CONFIG",
		Short:  "Run the audio sender of lanes bench hotspot --audio (started by the runner)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := hotspot.AudioMain(ctx, args[0], cmd.OutOrStdout()); err != nil {
				return fmt.Errorf("bench hotspotaudio: %w", err)
			}
			return nil
		},
	}
}

// ch5VideoCommand is the hidden `lanes bench ch5video send|recv CONFIG`:
// one end of the chapter-5 video application, started by the runner.
func ch5VideoCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "ch5video send|recv CONFIG",
		Short:  "Run one end of the chapter-5 video application (started by lanes bench ch5)",
		Hidden: true,
		Args:   cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := ch5.VideoMain(ctx, args[0], args[1], cmd.OutOrStdout()); err != nil {
				return fmt.Errorf("bench ch5video: %w", err)
			}
			return nil
		},
	}
}

// hotspotCommand is `lanes bench hotspot`: seed 000's experiment.
func hotspotCommand() *cobra.Command {
	var opts hotspot.Options
	var verbose bool
	cmd := &cobra.Command{
		Use:   "hotspot [flags]",
		Short: "Run seed 000's experiment: a TLS bulk transfer over an on/off link beside 0-30 CPU hogs, with and without boosting (root)",
		Long: `Run the experiment of seed 000 (priority boosting when connectivity appears): a
41 MB transfer (socat over TLS 1.3, OpenSSL) from a sender whose lane
is capped to a sliver of one CPU, over a 10 Mbit/s emulated link whose up and
down periods are exponential (mean 5 s each), with 0, 1, 10, 20 and 30 CPU hogs
(stress-ng) in the sender's lane. Arms: none (no boosting), static, incr and decr
(the seed's policies). The emulator's schedule is the contact oracle: lanesd hears
of each transition through the contact API. Writes hotspot.json and hotspot.md
(transfer times beside the seed's) into --out. A full run is 20 transfers of
about 70 s each. With --audio, the seed's second experiment instead: an
80-byte datagram every 20 ms from the lane (its send jitter, the standard
deviation of |inter-send time - 20 ms|) beside iperf3 UDP cross traffic of 0, 50
and 85 % of the link, with 0 and 1 hogs; writes audio.json and audio.md. Needs
root, socat, stress-ng, iperf3 and lanesd beside lanes.`,
		Example: `  sudo lanes bench hotspot --out bench/results/hotspot
  sudo lanes bench hotspot --arm none,incr --hogs 0,30 --size 10000000
  sudo lanes bench hotspot --slow-cpu 5 --hogs 0,30 --size 10000000
  sudo lanes bench hotspot --audio --out bench/results/hotspot`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if os.Geteuid() != 0 {
				return fmt.Errorf("bench hotspot: needs root (network namespaces, cgroups)")
			}
			if opts.LanesBin == "" {
				self, err := os.Executable()
				if err != nil {
					return fmt.Errorf("bench hotspot: find the lanes binary: %w", err)
				}
				opts.LanesBin = self
			}
			opts.Progress = os.Stderr
			if verbose {
				opts.Logf = func(f string, a ...any) { fmt.Fprintf(os.Stderr, "hotspot: "+f+"\n", a...) }
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if _, err := hotspot.Experiment(ctx, opts); err != nil {
				return fmt.Errorf("bench %w", err)
			}
			fmt.Fprintf(os.Stderr, "bench hotspot: results in %s\n", opts.OutDir)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.OutDir, "out", ".", "directory for hotspot.json and hotspot.md")
	f.StringSliceVar(&opts.Arms, "arm", nil, "run only these arms: none, static, incr, decr, incr-slice (INCR with a 100µs EEVDF slice), static-start, incr-start, decr-start (from = \"start\"; default the seed's four)")
	f.IntSliceVar(&opts.Hogs, "hogs", nil, "CPU hog counts (default 0,1,10,20,30)")
	f.IntVar(&opts.Repeats, "repeats", 1, "transfers per arm and hog count")
	f.Int64Var(&opts.Size, "size", 41_000_000, "bytes to transfer")
	f.Uint64Var(&opts.Rate, "rate", 10_000_000, "link rate each way, bit/s")
	f.DurationVar(&opts.MeanOn, "on", 5*time.Second, "mean up period of the link")
	f.DurationVar(&opts.MeanOff, "off", 5*time.Second, "mean down period of the link")
	f.Float64Var(&opts.CapPct, "cap", 5, "the sender's lane cap, percent of one CPU")
	f.DurationVar(&opts.CapPeriod, "cap-period", 0, "the period the cap is enforced in (the lane's cpu.cap_period; 0: the kernel's 100ms); it must hold 1ms of the cap")
	f.BoolVar(&opts.StartUp, "start-up", false, "start the sender only while the link is up, in every arm (a program launched when the network appears; for the start-* arms)")
	f.Float64Var(&opts.SlowCPU, "slow-cpu", 0, "instead of the cap, slow CPU 0 down to this percent of its time (5-95): a real-time thread spins for the rest of every millisecond, as from a clocked-down CPU (0: use the cap)")
	f.Uint64Var(&opts.Seed, "seed", 2006, "seed of the on/off schedule (repeat i uses seed+i)")
	f.BoolVar(&opts.Audio, "audio", false, "run the seed's audio experiment instead: send jitter of 80-byte datagrams every 20 ms beside cross traffic (hogs default 0,1)")
	f.DurationVar(&opts.AudioDuration, "audio-duration", 30*time.Second, "--audio: length of each run")
	f.IntSliceVar(&opts.Cross, "cross", nil, "--audio: cross traffic, percent of the link (default 0,50,85)")
	f.StringVar(&opts.LanesdBin, "lanesd", "", "lanesd binary (default: lanesd beside this binary)")
	f.BoolVarP(&verbose, "verbose", "v", false, "log the testbed's steps")
	return cmd
}

// execspeedCommand is `lanes bench execspeed`: seed 001's experiments.
func execspeedCommand() *cobra.Command {
	var opts execspeed.Options
	var verbose bool
	cmd := &cobra.Command{
		Use:   "execspeed [flags]",
		Short: "Run seed 001's experiments: send rate by CPU share (Figure 4, inter-arrival histograms, cpu.send_rate holding a rate) and cpu.reserve's share per 100 ms window (root)",
		Long: `Run the experiments of seed 001 (bandwidth control by regulating a process's
execution speed, and CPU reservations) on this host:

  figure4   a CPU-bound UDP sender (SHA-256 over every datagram) at CPU shares
            of 10-100 % of one CPU (a CFS quota every 10 ms), the payload rate
            at the receiver, and the least-squares line's R²;
  hist      the receiver's packet inter-arrival histograms at 25, 50 and 75 %,
            with the 10 ms quota period and the cgroup default 100 ms;
  hold      lanesd's cpu.send_rate holding half the free rate for 30 s while
            busy loops run through the middle third, beside the fixed share
            the line gives (open loop);
  reserve   a busy loop's share of a CPU in every 100 ms window in a lane with
            cpu.reserve (20 % and 20ms/100ms, by CFS bandwidth with lanesd's
            tick assist and without it, and by SCHED_DEADLINE) against busy
            loops on every CPU, beside a lane without a reservation.

The sender and receiver run in two network namespaces joined by a veth.
Writes execspeed.json and execspeed.md into --out. Needs root and lanesd
beside lanes; about three minutes.`,
		Example: `  sudo lanes bench execspeed --out bench/results/execspeed
  sudo lanes bench execspeed --part reserve --windows 100`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if os.Geteuid() != 0 {
				return fmt.Errorf("bench execspeed: needs root (network namespaces, cgroups)")
			}
			self, err := os.Executable()
			if err != nil {
				return fmt.Errorf("bench execspeed: find the lanes binary: %w", err)
			}
			opts.LanesBin = self
			opts.Progress = os.Stderr
			if verbose {
				opts.Logf = func(f string, a ...any) { fmt.Fprintf(os.Stderr, "execspeed: "+f+"\n", a...) }
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if _, err := execspeed.Experiment(ctx, opts); err != nil {
				return fmt.Errorf("bench %w", err)
			}
			fmt.Fprintf(os.Stderr, "bench execspeed: results in %s\n", opts.OutDir)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.OutDir, "out", ".", "directory for execspeed.json and execspeed.md")
	f.StringSliceVar(&opts.Parts, "part", nil, "run only these parts: figure4, hist, hold, reserve (default all; hold needs figure4)")
	f.IntVar(&opts.Work, "work", 40, "rounds of SHA-256 per datagram (the sender's CPU cost)")
	f.Float64SliceVar(&opts.Shares, "shares", nil, "Figure 4's CPU shares, percent of one CPU (default 10,20,...,100)")
	f.DurationVar(&opts.Point, "point", 3*time.Second, "how long each share is measured")
	f.DurationVar(&opts.Hold, "hold", 30*time.Second, "length of each hold run")
	f.Float64Var(&opts.Target, "target", 0.5, "the rate held, as a share of the free rate")
	f.IntVar(&opts.Windows, "windows", 50, "100 ms windows measured per reservation arm")
	f.StringVar(&opts.LanesdBin, "lanesd", "", "lanesd binary (default: lanesd beside this binary)")
	f.BoolVarP(&verbose, "verbose", "v", false, "log the testbed's steps")
	return cmd
}

// execspeedProcCommand is the hidden `lanes bench execspeedproc`: the
// processes `lanes bench execspeed` starts: "send ADDR WORK SECONDS" (the
// CPU-bound sender) or "spin SECONDS" (a busy loop).
func execspeedProcCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "execspeedproc send ADDR WORK SECONDS [WORK2 AFTER] | spin SECONDS",
		Short:  "Run a process of lanes bench execspeed (started by the runner)",
		Hidden: true,
		Args:   cobra.RangeArgs(2, 6),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			secs := func(s string) (time.Duration, error) {
				n, err := strconv.Atoi(s)
				if err != nil || n < 1 || n > 3600 {
					return 0, fmt.Errorf("seconds %q: want 1..3600", s)
				}
				return time.Duration(n) * time.Second, nil
			}
			switch {
			case args[0] == "send" && (len(args) == 4 || len(args) == 6):
				work, err := strconv.Atoi(args[2])
				if err != nil {
					return fmt.Errorf("work %q: not a number", args[2])
				}
				d, err := secs(args[3])
				if err != nil {
					return err
				}
				o := execspeed.SendOptions{Addr: args[1], Work: work, Duration: d}
				if len(args) == 6 {
					if o.Work2, err = strconv.Atoi(args[4]); err != nil {
						return fmt.Errorf("work2 %q: not a number", args[4])
					}
					if o.After, err = secs(args[5]); err != nil {
						return err
					}
				}
				_, err = execspeed.Send(ctx, o)
				return err
			case args[0] == "spin" && len(args) == 2:
				d, err := secs(args[1])
				if err != nil {
					return err
				}
				execspeed.Spin(ctx, d)
				return nil
			}
			return fmt.Errorf("want send ADDR WORK SECONDS [WORK2 AFTER] or spin SECONDS")
		},
	}
}

// coordCommand is `lanes bench coord`: seed 004's coordinated CPU and
// packet scheduling.
func coordCommand() *cobra.Command {
	o := coord.Defaults()
	var out string
	var verbose bool
	cmd := &cobra.Command{
		Use:   "coord [flags]",
		Short: "Run seed 004's coordinated CPU and packet scheduling: stream producers beside busy loops, lanes' DWCS pacer, with and without a CPU deadline and a phase (root)",
		Long: `Run seed 004's coordinated CPU and packet scheduling (§4.2) on this host.

Stream producers do a frame's CPU work (SHA-256) every period T beside busy
loops on every CPU and hand its packets to lanes' user-space DWCS pacer
(package pacer), which sends them over a veth at one packet a slot to a
receiver that timestamps each arrival in the kernel. Four arms:

  neither      ordinary producers, packet periods aligned with the CPU's
  phase-only   ordinary producers, packet periods Θ behind
  cpu-only     producers held to a CPU deadline (T), no phase
  coordinated  producers held to a CPU deadline Θ, packet periods Θ
               behind: every frame is ready at its packet release, and no
               packet starts later than Θ + T after its frame's release

The CPU deadline is SCHED_DEADLINE (due at Θ, or T) where lanes'
reservations use it (the kernel enforces deadline runtimes with HRTICK_DL;
lanes doctor's "cpu reserve" line), else SCHED_FIFO above the busy loops;
--cpu chooses.

Writes coord.json and coord.md into --out. Needs root; about ten seconds an
arm with the defaults.`,
		Example: `  sudo lanes bench coord --out bench/results/coord
  sudo lanes bench coord --arm coordinated --frames 1000 --hogs 8`,
		// Bad options are bad arguments: lanes exits 2 on them.
		Args: func(c *cobra.Command, a []string) error {
			if err := cobra.NoArgs(c, a); err != nil {
				return err
			}
			return o.Check()
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if os.Geteuid() != 0 {
				return fmt.Errorf("bench coord: needs root (network namespaces, SCHED_DEADLINE, SCHED_FIFO)")
			}
			o.Progress = os.Stderr
			if verbose {
				o.Logf = func(f string, a ...any) { fmt.Fprintf(os.Stderr, "coord: "+f+"\n", a...) }
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			res, err := coord.Experiment(ctx, o)
			if err != nil {
				return fmt.Errorf("bench %w", err)
			}
			if err := writeCoord(out, res); err != nil {
				return fmt.Errorf("bench coord: %w", err)
			}
			fmt.Fprintf(os.Stderr, "bench coord: results in %s\n", out)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&out, "out", ".", "directory for coord.json and coord.md")
	f.StringSliceVar(&o.Arms, "arm", nil, "run only these arms: "+strings.Join(coord.Arms, ", ")+" (default all)")
	f.IntVar(&o.Streams, "streams", o.Streams, "streams (producers)")
	f.DurationVar(&o.Period, "period", o.Period, "T: a frame every period")
	f.DurationVar(&o.Phase, "phase", o.Phase, "Θ: the packet periods' delay behind the CPU periods (and the producers' CPU deadline)")
	f.IntVar(&o.Packets, "packets", o.Packets, "packets of 1200 bytes a frame")
	f.IntVar(&o.X, "x", o.X, "x of the window constraint x/y: frames that may miss in every y")
	f.IntVar(&o.Y, "y", o.Y, "y of the window constraint x/y")
	f.DurationVar(&o.Slot, "slot", o.Slot, "one packet's time on the link (1 ms: 9.6 Mbit/s)")
	f.DurationVar(&o.Work, "work", o.Work, "a frame's CPU time (calibrated SHA-256 rounds)")
	f.IntVar(&o.Frames, "frames", o.Frames, "frames a stream and arm")
	f.StringVar(&o.CPU, "cpu", o.CPU, "the CPU deadline's mechanism: auto, deadline (SCHED_DEADLINE) or fifo (SCHED_FIFO)")
	f.IntVar(&o.Hogs, "hogs", 0, "busy loops (0: two per CPU; -1: none)")
	f.BoolVarP(&verbose, "verbose", "v", false, "log the testbed's steps")
	return cmd
}

// writeCoord writes coord.json and coord.md into dir.
func writeCoord(dir string, res coord.Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "coord.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	var md bytes.Buffer
	fmt.Fprintf(&md, "# lanes bench coord\n\n")
	res.Markdown(&md)
	return os.WriteFile(filepath.Join(dir, "coord.md"), md.Bytes(), 0o644)
}

// multinetCommand is `lanes bench multinet`: seed 002's Intentional
// Networking evaluation.
func multinetCommand() *cobra.Command {
	var opts multinet.Options
	var verbose bool
	cmd := &cobra.Command{
		Use:   "multinet [flags]",
		Short: "Run seed 002's Intentional Networking evaluation: labelled traffic over two networks against one network, MPTCP and no labels (root)",
		Long: `Run the evaluation of seed 002's Intentional Networking on two emulated networks
between a client and a server namespace, in the seed's synthetic scenarios
(Table 2.3): hotspot (0.6 Mbit/s at 20 ms beside 2 Mbit/s at 400 ms) and
intermittent (Wi-Fi at 3 Mbit/s, 60 ms, coming and going, beside 0.3 Mbit/s at
400 ms), and vehicular (the shared T-Mobile UMTS driving trace at 300 ms beside
Wi-Fi up 27 % of the time; the trace is read from --traces). Workloads: sensor (bulk uploads every second with urgent messages in
three episodes; urgent latency and bulk throughput) and email (a server pushing
100 messages while the user opens five; on-demand latency and the time to fetch
all) and fs (a file system client writing back 40 files in order while the user
fetches a block every half second; fetch latency and the time to write back
all). Arms: single0 and single1 (TCP over one network), mptcp (one MPTCP
connection, the kernel's path manager and default scheduler), intnw-nolabels
(the multi-socket, every message bg-large in order), intnw (the application's
labels; its sensor holds a reading the multi-socket cannot send now with a
thunk and drops it when the next comes) and proxy (the application unmodified,
a connection from an interactive lane and one from a background lane carried by
lanes proxy); when named with --arm, intnw-nohint (no bandwidth hints: the
connection scout's probes measure each network), intnw-noprobe (no hints and no
probes), intnw-nothunk (the sensor queueing every reading) and mptcp-select
(MPTCP with the sensor as the seed's version without Intentional Networking:
a reading its socket cannot take before the next one comes is dropped; the
mptcp arm's sensor queues every reading). Writes multinet.json and
multinet.md into --out: each arm's figures and the labelled multi-socket's
ratios to them. Needs root and iproute2.`,
		Example: `  sudo lanes bench multinet --out bench/results/multinet
  sudo lanes bench multinet --scenario hotspot --workload email --arm mptcp,intnw`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if os.Geteuid() != 0 {
				return fmt.Errorf("bench multinet: needs root (network namespaces)")
			}
			opts.Progress = os.Stderr
			if verbose {
				opts.Logf = func(f string, a ...any) { fmt.Fprintf(os.Stderr, "multinet: "+f+"\n", a...) }
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if _, err := multinet.Experiment(ctx, opts); err != nil {
				return fmt.Errorf("bench %w", err)
			}
			fmt.Fprintf(os.Stderr, "bench multinet: results in %s\n", opts.OutDir)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.OutDir, "out", ".", "directory for multinet.json and multinet.md")
	f.StringSliceVar(&opts.Scenarios, "scenario", nil, "run only these scenarios: hotspot, intermittent, vehicular (default all)")
	f.StringSliceVar(&opts.Workloads, "workload", nil, "run only these workloads: sensor, email, fs (default all)")
	f.StringSliceVar(&opts.Arms, "arm", nil, "run only these arms: "+strings.Join(multinet.Arms, ", ")+" (default all), or "+strings.Join(multinet.NamedArms, ", "))
	f.StringVar(&opts.TraceDir, "traces", filepath.Join("bench", "traces"), "directory of the link traces (the repository's bench/traces)")
	f.IntVar(&opts.Repeats, "repeats", 1, "runs per scenario, workload and arm")
	f.DurationVar(&opts.Duration, "duration", 120*time.Second, "length of a sensor run (20s..1h)")
	f.Uint64Var(&opts.Seed, "seed", 2010, "seed of the message sizes and the on/off schedules")
	f.BoolVarP(&verbose, "verbose", "v", false, "log the testbed's and the multi-socket's steps")
	return cmd
}
