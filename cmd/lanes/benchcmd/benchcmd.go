package benchcmd

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/lanes-qos/lanes/bench"
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
	cmd.AddCommand(genCommand())
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
