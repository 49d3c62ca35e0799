package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/api/client"
)

func newEventsCmd(g *globals) *cobra.Command {
	var q client.EventsQuery
	cmd := &cobra.Command{
		Use:   "events [-f] [--topic PATTERN]... [--filter EXPR] [--since T] [--flush D] [--json]",
		Short: "Show lanesd's events: the history, and with -f the live stream",
		Long: `Show the events on lanesd's event channels, one a line: time, source, topic,
then the payload as key=value, sorted by key. Without -f: the events the
history keeps (all of it, or from --since), then exit. With -f: from --since
(history first, then live, with nothing missed or repeated), or live only.

Topics are dot-separated tokens, e.g.
  proc.exec proc.exit                     processes started and ended
  proc.fork                               processes created (made only while a
                                          stream or controller subscribes to it)
  net.link.<if> net.route.default         links, addresses, routes, connectivity
  lane.<lane>.cpu lane.<lane>.disk        lanes' usage (lane.<lane>.net.up|down|rtt)
  idletime.<resource>.hold|release        idletime scheduling's holds
  app.<pid>.report app.<pid>.directive    applications' QoS reports, directives
  controller.<name>.action                every change a controller makes
  net.auto.probe net.auto.rate            rate = "auto": round trips, decisions
A pattern's "*" matches one token, a last ">" the rest: lane.*.cpu, net.>.
app.<pid> events are shown to root and to the owner of the process only.

--filter is a CEL expression (https://cel.dev) over topic, source, seq,
time, deadline and payload that must be true for an event to be shown; the
daemon applies it, so refused events cost the stream nothing.

The history (config [events]) keeps only some topics (not proc.* by
default). A client that cannot keep up is told: a line on topic
events.dropped with the count of events it missed.

--flush trades latency for the daemon's CPU on busy streams: the daemon
writes to this stream at most once per interval (each write costs a system
call and a wake-up of this process), so an event waits up to that long.
Without it every burst of events is written as it comes.`,
		Example: `  lanes events -f
  lanes events --since 10m --topic 'lane.*.cpu'
  lanes events -f --topic 'lane.>' --filter 'payload.usage > 0.9'
  lanes events -f --topic 'app.>' --filter 'has(payload.fps) && payload.fps < payload.fps_min'
  lanes events -f --topic 'proc.>' --flush 20ms --json > procs.ndjson
  lanes events --since 2026-11-23T08:00:00Z --json | jq .payload`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := g.client().Events(cmd.Context(), q)
			if err != nil {
				return fmt.Errorf("events: %w", eventsError(needDaemon(err)))
			}
			defer s.Close()
			for {
				ev, err := s.Next()
				if err == io.EOF {
					return nil
				}
				if err != nil {
					return fmt.Errorf("events: %w", err)
				}
				if g.json {
					if _, err := fmt.Fprintf(Stdout, "%s\n", s.Raw()); err != nil {
						return err
					}
					continue
				}
				if _, err := fmt.Fprintln(Stdout, FormatEvent(ev)); err != nil {
					return err
				}
			}
		},
	}
	cmd.Flags().BoolVarP(&q.Follow, "follow", "f", false, "keep printing events as they come")
	cmd.Flags().StringArrayVar(&q.Topics, "topic", nil, "topic pattern (repeatable; default every topic)")
	cmd.Flags().StringVar(&q.Filter, "filter", "", "CEL expression an event must satisfy")
	cmd.Flags().StringVar(&q.Since, "since", "", "start from this time (RFC 3339) or this long ago (10m, 2h)")
	cmd.Flags().DurationVar(&q.Flush, "flush", 0, "with -f: the daemon writes at most once per this interval (0 to 250ms; events wait up to that long)")
	cmd.Flags().BoolVar(&g.json, "json", false, "print each event as the daemon sends it (NDJSON)")
	return cmd
}

// FormatEvent is an event's line in `lanes events`.
func FormatEvent(ev api.Event) string {
	var b strings.Builder
	b.WriteString(ev.Time.Local().Format("2006-01-02 15:04:05.000"))
	b.WriteByte(' ')
	b.WriteString(ev.Source)
	b.WriteByte(' ')
	b.WriteString(ev.Topic)
	keys := make([]string, 0, len(ev.Payload))
	for k := range ev.Payload {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteByte(' ')
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(formatValue(ev.Payload[k]))
	}
	if !ev.Deadline.IsZero() {
		b.WriteString(" deadline=")
		b.WriteString(ev.Deadline.Local().Format("15:04:05.000"))
	}
	return b.String()
}

func formatValue(v any) string {
	switch x := v.(type) {
	case string:
		if x == "" || strings.ContainsAny(x, " \t\n\"=") {
			return strconv.Quote(x)
		}
		return x
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	case nil:
		return "null"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// eventsError shows a bad filter with a caret under the position.
func eventsError(err error) error {
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Param != "filter" || ae.Expr == "" {
		return err
	}
	return errors.New(ae.Message + "\n" + Caret(ae.Expr, ae.Line, ae.Column))
}

// Caret returns the line of expr at line (1-based), indented, and a caret
// under column (1-based); the whole expression when line is 0.
func Caret(expr string, line, column int) string {
	lines := strings.Split(expr, "\n")
	if line < 1 || line > len(lines) {
		return "  " + strings.ReplaceAll(expr, "\n", "\n  ")
	}
	l := lines[line-1]
	col := column - 1
	if col < 0 {
		col = 0
	}
	// Keep tabs so that the caret lines up under them.
	var pad strings.Builder
	for i, r := range l {
		if i >= col {
			break
		}
		if r == '\t' {
			pad.WriteByte('\t')
		} else {
			pad.WriteByte(' ')
		}
	}
	for i := len(l); i < col; i++ {
		pad.WriteByte(' ')
	}
	return "  " + l + "\n  " + pad.String() + "^"
}

func newReportCmd(g *globals) *cobra.Command {
	var (
		pid     int
		targets []string
	)
	cmd := &cobra.Command{
		Use:   "report --pid PID METRIC=VALUE... [--target METRIC=MIN:MAX]...",
		Short: "Report a process's QoS metrics to lanesd (root, for scripts)",
		Long: `Publish an application QoS report (topic app.<pid>.report) for process PID:
metric values, and the range each should stay in. Metric names are made of
a-z, 0-9 and _; at most 32 metrics.

A report is about the process that sends it: programs report for themselves
over the API, and lanesd takes their PID from the socket (SO_PEERCRED).
This command's own process would be useless to report for, so it reports for
--pid, which only root may give. From a program (any user), for itself:

  curl --unix-socket /run/lanes/lanes.sock -X POST http://lanesd/v1/report \
    -d '{"metrics":{"fps":19.5,"latency_ms":40},"targets":{"fps":{"min":18,"max":25}}}'

and for the directives lanesd's controllers send it (one JSON event a line):

  curl --unix-socket /run/lanes/lanes.sock -N http://lanesd/v1/directives`,
		Example: `  sudo lanes report --pid 4242 fps=19.5 latency_ms=40 --target fps=18:25
  sudo lanes report --pid 4242 queue=12 --target queue=:50`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := ParseReportArgs(args, targets)
			if err != nil {
				return &ExitError{Code: ExitBadInput, Err: fmt.Errorf("report: %w", err)}
			}
			if pid <= 0 {
				return &ExitError{Code: ExitBadInput, Err: errors.New("report: give --pid PID: a report is about the process that sends it, and this command's own would end at once (programs report for themselves: see lanes report --help)")}
			}
			if os.Geteuid() != 0 {
				return &ExitError{Code: ExitRefused, Err: fmt.Errorf("report: only root may report for another process (--pid %d); a program reports for itself over the API (see lanes report --help)", pid)}
			}
			req.PID = pid
			r, err := g.client().Report(cmd.Context(), req)
			if err != nil {
				return fmt.Errorf("report: %w", needDaemon(err))
			}
			if g.json {
				return printJSON(r)
			}
			laneName := r.Lane
			if laneName == "" {
				laneName = "no lane"
			}
			fmt.Fprintf(Stdout, "published %s #%d (pid %d, %s)\n", r.Topic, r.Seq, r.PID, laneName)
			return nil
		},
	}
	cmd.Flags().IntVar(&pid, "pid", 0, "the process the report is about (root only)")
	cmd.Flags().StringArrayVar(&targets, "target", nil, "METRIC=MIN:MAX, the range a metric should stay in (either bound may be empty)")
	addJSON(cmd, g)
	return cmd
}

// ParseReportArgs reads METRIC=VALUE arguments and METRIC=MIN:MAX targets
// (the daemon checks names and limits again).
func ParseReportArgs(args, targets []string) (api.ReportRequest, error) {
	req := api.ReportRequest{Metrics: map[string]float64{}}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return req, fmt.Errorf("%q is not METRIC=VALUE", a)
		}
		if _, dup := req.Metrics[k]; dup {
			return req, fmt.Errorf("metric %q given twice", k)
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return req, fmt.Errorf("%q: %q is not a number", a, v)
		}
		req.Metrics[k] = f
	}
	for _, t := range targets {
		k, rng, ok := strings.Cut(t, "=")
		lo, hi, ok2 := strings.Cut(rng, ":")
		if !ok || !ok2 || k == "" || (lo == "" && hi == "") {
			return req, fmt.Errorf("--target %q is not METRIC=MIN:MAX (e.g. fps=18:25, fps=18:, fps=:25)", t)
		}
		if req.Targets == nil {
			req.Targets = map[string]api.Target{}
		}
		var tg api.Target
		for _, b := range []struct {
			s   string
			dst **float64
		}{{lo, &tg.Min}, {hi, &tg.Max}} {
			if b.s == "" {
				continue
			}
			f, err := strconv.ParseFloat(b.s, 64)
			if err != nil {
				return req, fmt.Errorf("--target %q: %q is not a number", t, b.s)
			}
			*b.dst = &f
		}
		req.Targets[k] = tg
	}
	return req, nil
}

// printReports prints each process's last QoS report: one line per
// process, its metrics in name order.
func printReports(rs []api.AppReport, now time.Time) {
	fmt.Fprintln(Stdout, "application reports (the last of each process):")
	for _, r := range rs {
		l := r.Lane
		if l == "" {
			l = "no lane"
		}
		names := make([]string, 0, len(r.Metrics))
		for k := range r.Metrics {
			names = append(names, k)
		}
		sort.Strings(names)
		var b strings.Builder
		for i, k := range names {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%s=%s", k, strconv.FormatFloat(r.Metrics[k], 'g', 4, 64))
		}
		fmt.Fprintf(Stdout, "  pid %d (%s, %s ago): %s\n", r.PID, l, now.Sub(r.Time).Round(time.Second), b.String())
	}
}
