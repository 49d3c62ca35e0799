package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/enforce"
	"github.com/lanes-qos/lanes/internal/features"
	"github.com/lanes-qos/lanes/internal/paths"
	"github.com/lanes-qos/lanes/lane"
)

func newMoveCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "move PID... LANE",
		Short: "Move running processes (with their threads and children) into a lane",
		Long: `Move each PID, all its threads and all its descendants into LANE. All or
nothing: if one PID does not exist, or exits during the move, nothing moves.
Non-root users may move only their own processes, into lanes the config grants
to them (unprivileged = true).`,
		Example:           "  lanes move 4242 background\n  lanes move $(pgrep rsync) background",
		Args:              cobra.MinimumNArgs(2),
		ValidArgsFunction: g.completeMove,
		RunE: func(cmd *cobra.Command, args []string) error {
			laneName := args[len(args)-1]
			var pids []int
			for _, a := range args[:len(args)-1] {
				pid, err := strconv.Atoi(a)
				if err != nil || pid <= 0 {
					return &ExitError{Code: ExitBadInput, Err: fmt.Errorf("move: %q is not a PID (usage: lanes move PID... LANE)", a)}
				}
				pids = append(pids, pid)
			}
			resp, err := g.client().Move(cmd.Context(), laneName, pids...)
			if err != nil {
				return fmt.Errorf("move: %w", needDaemon(err))
			}
			if g.json {
				return printJSON(resp)
			}
			fmt.Fprintf(Stdout, "moved %d process(es) to %s: %s\n", len(resp.Moved), resp.Lane, joinInts(resp.Moved, 20))
			for _, u := range resp.Units {
				fmt.Fprintf(Stdout, "  with the whole systemd unit %s of process %d (%d processes)\n", u.Unit, u.PID, u.Procs)
			}
			return nil
		},
	}
	addJSON(cmd, g)
	return cmd
}

func describeCPU(c api.CPUSettings) string {
	s := "weight " + strconv.Itoa(c.Weight)
	if c.Idle {
		s += ", idle"
	}
	if c.CapPercent > 0 {
		s += fmt.Sprintf(", cap %g%%", c.CapPercent)
	}
	return s
}

func describeDisk(d api.DiskSettings) string {
	s := d.Class
	switch d.Class {
	case "":
		s = "unchanged"
	case "idle":
	default:
		s += "/" + strconv.Itoa(d.Level)
	}
	if d.Weight > 0 {
		s += ", weight " + strconv.Itoa(d.Weight)
	}
	return s
}

func describeNet(n api.NetSettings) string {
	s := "prio " + strconv.Itoa(n.Priority)
	if n.Rate > 0 {
		s += ", rate " + lane.FormatRate(n.Rate)
	}
	if n.Ceil > 0 {
		s += ", ceil " + lane.FormatRate(n.Ceil)
	}
	return s
}

func newLsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List lanes: settings, members and usage",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := g.client().Lanes(cmd.Context())
			if err != nil {
				return fmt.Errorf("ls: %w", needDaemon(err))
			}
			if g.json {
				return printJSON(r)
			}
			printLanes(r.Lanes)
			return nil
		},
	}
	addJSON(cmd, g)
	return cmd
}

func printLanes(ls []api.Lane) {
	w := table()
	fmt.Fprintln(w, "LANE\tCPU\tDISK\tNET\tCPU TIME\tMEMBERS")
	for _, l := range ls {
		name := l.Name
		if l.Default {
			name += " (default)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", name, describeCPU(l.CPU), describeDisk(l.Disk),
			describeNet(l.Net), l.CPUTime.Round(time.Millisecond), joinInts(l.Members, 8))
	}
	w.Flush()
	var rows []string
	for _, l := range ls {
		for _, c := range l.NetCounters {
			rows = append(rows, fmt.Sprintf("%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d", l.Name, c.Iface, c.Direction,
				humanRate(c.RateBps), c.Bytes, c.Packets, c.Drops, c.Backlog))
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(Stdout)
	w = table()
	fmt.Fprintln(w, "LANE\tIFACE\tDIRECTION\tRATE NOW\tBYTES\tPACKETS\tDROPS\tBACKLOG (B)")
	for _, r := range rows {
		fmt.Fprintln(w, r)
	}
	w.Flush()
}

func newPsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ps",
		Short: "List the processes in lanes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := g.client().Procs(cmd.Context())
			if err != nil {
				return fmt.Errorf("ps: %w", needDaemon(err))
			}
			if g.json {
				return printJSON(r)
			}
			w := table()
			fmt.Fprintln(w, "PID\tLANE\tCOMMAND\tUID\tTHREADS\tIO\tWHY")
			for _, p := range r.Procs {
				fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%d\t%s\t%s\n", p.PID, p.Lane, p.Comm, p.UID, p.Threads, p.IOClass, p.Why)
			}
			return w.Flush()
		},
	}
	addJSON(cmd, g)
	return cmd
}

func newStatusCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the daemon's status, health and lanes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := g.client().Status(cmd.Context())
			if err != nil {
				return fmt.Errorf("status: %w", needDaemon(err))
			}
			if g.json {
				return printJSON(st)
			}
			fmt.Fprintf(Stdout, "lanesd %s, pid %d, up %s\n", st.Version, st.PID, time.Since(st.Started).Round(time.Second))
			fmt.Fprintf(Stdout, "config:  %s (loaded %s)\n", st.Config, st.ConfigLoad.Format(time.RFC3339))
			for _, w := range st.ConfigWarnings {
				fmt.Fprintf(Stdout, "         warning: %s\n", w)
			}
			if st.ConfigError != "" {
				fmt.Fprintf(Stdout, "         last reload failed, running config kept: %s\n", st.ConfigError)
			}
			fmt.Fprintf(Stdout, "state:   %s\nevents:  %s\n", st.StateDB, st.Events)
			if b := st.Bridge; b != nil {
				printBridge(b)
			}
			if len(st.Health) == 0 {
				fmt.Fprintln(Stdout, "health:  ok")
			}
			for _, h := range st.Health {
				fmt.Fprintf(Stdout, "health:  %s: %s\n", h.Code, h.Message)
			}
			fmt.Fprintln(Stdout)
			printLanes(st.Lanes)
			if len(st.Idletime) > 0 {
				fmt.Fprintln(Stdout)
				printIdletime(st.Idletime)
			}
			if len(st.Links) > 0 {
				fmt.Fprintln(Stdout)
				printLinks(st.Links)
			}
			if len(st.Controllers) > 0 {
				fmt.Fprintln(Stdout)
				printControllers(st.Controllers)
			}
			if len(st.Boost) > 0 {
				fmt.Fprintln(Stdout)
				printBoost(st.Boost)
			}
			if len(st.Reserve) > 0 {
				fmt.Fprintln(Stdout)
				printReserve(st.Reserve, st.ReserveAssist)
			}
			if len(st.Speed) > 0 {
				fmt.Fprintln(Stdout)
				printSpeed(st.Speed)
			}
			if len(st.Reports) > 0 {
				fmt.Fprintln(Stdout)
				printReports(st.Reports, time.Now())
			}
			if st.Bus != nil {
				fmt.Fprintln(Stdout)
				printBus(st.Bus)
			}
			if h := st.History; h != nil {
				printHistory(h)
			}
			return nil
		},
	}
	addJSON(cmd, g)
	return cmd
}

// printControllers prints each running controller: what it watches, its
// knobs' values now, its last sample and action.
func printControllers(cs []api.Controller) {
	ago := func(t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return time.Since(t).Round(100*time.Millisecond).String() + " ago"
	}
	w := table()
	fmt.Fprintln(w, "CONTROLLER	LANE	LAW	METRIC	TARGET	LAST VALUE	SAMPLES	KNOBS NOW	ACTIONS	LAST ACTION	ERRORS")
	for _, c := range cs {
		knobs := make([]string, 0, len(c.Knobs))
		for _, k := range c.Knobs {
			knobs = append(knobs, fmt.Sprintf("%s=%g", k.Name, k.Value))
		}
		last := "-"
		if c.Samples > 0 {
			last = fmt.Sprintf("%g (%s)", c.LastValue, ago(c.LastSample))
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%d\t%s\t%d\n", c.Name, c.Lane, c.Law, c.Metric, c.Target, last,
			c.Samples, strings.Join(knobs, " "), c.Actions, ago(c.LastAction), c.Errors)
	}
	w.Flush()
}

// printHistory prints the event history's size against its limits.
func printHistory(h *api.History) {
	fmt.Fprintf(Stdout, "history: %d events (keeps %d, %s; topics %s)", h.Events, h.Keep, h.Retention, strings.Join(h.Topics, ","))
	if !h.Oldest.IsZero() {
		fmt.Fprintf(Stdout, ", oldest %s", h.Oldest.Local().Format(time.RFC3339))
	}
	if h.Error != "" {
		fmt.Fprintf(Stdout, ": %s", h.Error)
	}
	fmt.Fprintln(Stdout)
}

// printBus prints the event channels' counters: one line per subscription,
// its queue and what it lost.
func printBus(b *api.EventBus) {
	fmt.Fprintf(Stdout, "event bus: %d published", b.Published)
	if b.InvalidTopics > 0 {
		fmt.Fprintf(Stdout, ", %d refused (invalid topic)", b.InvalidTopics)
	}
	fmt.Fprintln(Stdout)
	if len(b.Subscriptions) == 0 {
		return
	}
	w := table()
	fmt.Fprintln(w, "SUBSCRIBER\tTOPICS\tQUEUED\tDELIVERED\tDROPPED\tEXPIRED\tFILTERED\tFILTER ERRORS")
	for _, s := range b.Subscriptions {
		fmt.Fprintf(w, "%s\t%s\t%d/%d %s\t%d\t%d\t%d\t%d\t%d\n", s.Name, strings.Join(s.Topics, ","), s.Queued, s.Queue, s.Policy,
			s.Delivered, s.Dropped, s.Expired, s.Filtered, s.FilterErrors)
	}
	w.Flush()
}

// printLinks prints each shaped interface's offloads, segment sizes and
// default congestion control, and the warnings about them.
func printLinks(links []api.NetLink) {
	onOff := func(b bool) string {
		if b {
			return "on"
		}
		return "off"
	}
	size := func(now, orig uint32) string {
		if orig != 0 && orig != now {
			return fmt.Sprintf("%d (lanes; was %d)", now, orig)
		}
		return fmt.Sprint(now)
	}
	w := table()
	fmt.Fprintln(w, "LINK\tTSO\tGSO\tGRO\tGSO MAX\tGRO MAX\tCONGESTION CONTROL\tDOWNLOAD WINDOW")
	for _, l := range links {
		gro := onOff(l.GRO)
		if l.LRO {
			gro += " (LRO on)"
		}
		win := "not bounded"
		if l.ReceiveWindow > 0 {
			win = fmt.Sprintf("<= %g x ceiling x RTT", l.ReceiveWindow)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", l.Iface, onOff(l.TSO), onOff(l.GSO), gro,
			size(l.GSOMaxSize, l.OrigGSOMaxSize), size(l.GROMaxSize, l.OrigGROMaxSize), l.CongestionControl, win)
	}
	w.Flush()
	for _, l := range links {
		for _, warn := range l.Warnings {
			fmt.Fprintf(Stdout, "warning: %s: %s\n", l.Iface, warn)
		}
		if l.Error != "" {
			fmt.Fprintf(Stdout, "%s: could not read: %s\n", l.Iface, l.Error)
		}
	}
}

// printIdletime prints the preemption-interval state of each resource.
func printIdletime(gates []api.IdleGate) {
	w := table()
	fmt.Fprintln(w, "IDLETIME	STATE	PI	MODE	PREEMPT	FG@IDLE	FG@PI	EXPIRED	HELD	REACTION p50/p99	ERRORS")
	for _, g := range gates {
		pi := g.PI.String()
		if g.PI >= 1<<63-1 {
			pi = "inf"
		}
		held := g.Time["in_pi"] + g.Time["foreground"]
		var total time.Duration
		for _, d := range g.Time {
			total += d
		}
		heldPct := "-"
		if total > 0 {
			heldPct = fmt.Sprintf("%.0f%%", 100*float64(held)/float64(total))
		}
		react := "-"
		if g.Reaction.N > 0 {
			react = fmt.Sprintf("%s/%s", g.Reaction.P50.Round(time.Microsecond), g.Reaction.P99.Round(time.Microsecond))
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%d\n", g.Name, g.State, pi, g.Mode,
			g.Preemptions, g.ForegroundIdle, g.ForegroundInPI, g.Expiries, heldPct, react, g.Errors)
	}
	w.Flush()
}

func newDoctorCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Say which kernel mechanism lanes uses for each resource, and why",
		Long: `For each resource (process grouping, CPU, disk, events, network), print the
backend lanes uses on this kernel, whether it is the preferred one, and why.
Asks lanesd when it runs; otherwise probes this host itself (read-only).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var kernel, source string
			var mechs []api.Mechanism
			if r, err := g.client().Doctor(cmd.Context()); err == nil {
				kernel, mechs, source = r.Kernel, r.Mechanisms, "lanesd"
			} else {
				local, err := enforce.Probe()
				if err != nil {
					return fmt.Errorf("doctor: %w", err)
				}
				for _, probe := range g.probes {
					more, err := probe()
					if err != nil {
						return fmt.Errorf("doctor: %w", err)
					}
					local = append(local, more...)
				}
				for _, m := range local {
					mechs = append(mechs, api.Mechanism(m))
				}
				kernel, source = features.KernelRelease(), "local probe (no daemon running)"
			}
			if g.json {
				return printJSON(api.DoctorResponse{Kernel: kernel, Mechanisms: mechs})
			}
			fmt.Fprintf(Stdout, "kernel %s, from %s\n\n", kernel, source)
			w := table()
			fmt.Fprintln(w, "RESOURCE\tBACKEND\tPREFERRED\tWHY")
			bad := 0
			for _, m := range mechs {
				pref := "yes"
				if !m.Preferred {
					pref = "fallback"
				}
				if !m.OK {
					pref, bad = "MISSING", bad+1
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", m.Resource, m.Backend, pref, m.Reason)
			}
			w.Flush()
			if bad > 0 {
				return &ExitError{Code: 1, Err: fmt.Errorf("doctor: %d mechanism(s) have no working backend", bad)}
			}
			return nil
		},
	}
	addJSON(cmd, g)
	return cmd
}

func newConfigCmd(g *globals) *cobra.Command {
	cfg := &cobra.Command{Use: "config", Short: "Work with lanes config files"}
	check := &cobra.Command{
		Use:   "check FILE",
		Short: "Check a config file; print every error and warning with its file, line and key",
		Long: `Check FILE as lanesd would load it. Errors (exit status 2) name the file,
line and key of each; warnings name what loads but does not do what it reads
as: a rate in bytes per second ("20Mbps" is 160 Mbit/s, as in tc), a lane's
shaping setting while no interface is shaped.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := lane.Load(args[0])
			if err == nil {
				err = c.CheckHost()
			}
			if err != nil {
				return &ExitError{Code: ExitBadInput, Err: err}
			}
			if g.json {
				return printJSON(configCheck{File: args[0], Lanes: c.Order, Rules: len(c.Rules), Warnings: nonNil(c.Warnings)})
			}
			for _, w := range c.Warnings {
				fmt.Fprintf(Stdout, "warning: %s\n", w)
			}
			fmt.Fprintf(Stdout, "%s: ok: %d lanes (%s), %d rules", args[0], len(c.Order), strings.Join(c.Order, ", "), len(c.Rules))
			if n := len(c.Warnings); n > 0 {
				fmt.Fprintf(Stdout, ", %d warning(s)", n)
			}
			fmt.Fprintln(Stdout)
			return nil
		},
	}
	addJSON(check, g)
	show := &cobra.Command{
		Use:   "show [FILE]",
		Short: "Print the configuration in force: FILE (or the one lanesd loads) merged over the defaults",
		Long: `Print every setting as a config file: the built-in defaults with FILE merged
over them, so nothing is left to guess. Without FILE, the config lanesd
loads: ` + paths.ConfigFile + ` if it exists, else the embedded defaults.
The output reads back as the same configuration; [[controller]] tables are
named in a comment, not written out.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var c *lane.Config
			var err error
			if len(args) == 1 {
				c, err = lane.Load(args[0])
			} else {
				c, _, err = paths.LoadConfig("")
			}
			if err != nil {
				return &ExitError{Code: ExitBadInput, Err: err}
			}
			out, err := c.File()
			if err != nil {
				return err
			}
			for _, w := range c.Warnings {
				fmt.Fprintf(Stdout, "# warning: %s\n", w)
			}
			_, err = Stdout.Write(out)
			return err
		},
	}
	cfg.AddCommand(check, show)
	return cfg
}

// configCheck is lanes config check --json's output for a valid file.
type configCheck struct {
	File     string   `json:"file"`
	Lanes    []string `json:"lanes"`
	Rules    int      `json:"rules"`
	Warnings []string `json:"warnings"`
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func newReloadCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "reload",
		Short: "Make lanesd reread its config file (root only; a bad file keeps the running config)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := g.client().Reload(cmd.Context())
			if err != nil {
				return fmt.Errorf("reload: %w", needDaemon(err))
			}
			if g.json {
				return printJSON(r)
			}
			for _, w := range r.Warnings {
				fmt.Fprintf(Stdout, "warning: %s\n", w)
			}
			fmt.Fprintf(Stdout, "reloaded %s: lanes %s\n", r.Config, strings.Join(r.Lanes, ", "))
			return nil
		},
	}
	addJSON(cmd, g)
	return cmd
}

// humanRate formats a measured rate in bits per second.
func humanRate(bps float64) string {
	switch {
	case bps >= 1e9:
		return fmt.Sprintf("%.2f Gbit/s", bps/1e9)
	case bps >= 1e6:
		return fmt.Sprintf("%.2f Mbit/s", bps/1e6)
	case bps >= 1e3:
		return fmt.Sprintf("%.1f kbit/s", bps/1e3)
	}
	return fmt.Sprintf("%.0f bit/s", bps)
}
