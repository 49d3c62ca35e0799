package coord

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/lanes-qos/lanes/pacer"
)

// Options are an experiment's.
type Options struct {
	// Streams, each with Packets packets of 1200 bytes a frame, X/Y
	// window constraint, every Period with the phase Phase.
	Streams int
	Period  time.Duration
	Phase   time.Duration
	Packets int
	X, Y    int
	Slot    time.Duration
	// CPU is how the CPU half holds a frame to its deadline in the arms
	// that have one: "deadline" (SCHED_DEADLINE due at Θ, or at T with
	// no phase), "fifo" (SCHED_FIFO above everything but the pacer) or
	// "auto": deadline where lanes' reservations would use it (the
	// kernel enforces deadline runtimes with HRTICK_DL), else fifo.
	CPU string
	// Work is a frame's CPU time.
	Work time.Duration
	// Frames per stream and arm.
	Frames int
	// Hogs busy loops (0: two per CPU; -1: none).
	Hogs int
	// Arms to run (nil: all, in Arms' order).
	Arms     []string
	Progress io.Writer            `json:"-"`
	Logf     func(string, ...any) `json:"-"`
}

// Defaults are the seed's example (T = 30 ms, Θ = 15 ms: l_max 45 ms)
// with three streams that need 60 % of a 9.6 Mbit/s link at least.
func Defaults() Options {
	return Options{Streams: 3, Period: 30 * time.Millisecond, Phase: 15 * time.Millisecond, Packets: 8, X: 1, Y: 4,
		Slot: time.Millisecond, Work: 3 * time.Millisecond, Frames: 300, CPU: "auto"}
}

// The arms.
const (
	ArmCoordinated = "coordinated" // deadline producers, packet periods Θ behind
	ArmPhaseOnly   = "phase-only"  // ordinary producers, packet periods Θ behind
	ArmCPUOnly     = "cpu-only"    // deadline producers (due at T), no phase
	ArmNeither     = "neither"     // ordinary producers, no phase
)

// Arms is every arm in the order they run.
var Arms = []string{ArmNeither, ArmPhaseOnly, ArmCPUOnly, ArmCoordinated}

func armParts(arm string) (deadline, phase bool, err error) {
	switch arm {
	case ArmCoordinated:
		return true, true, nil
	case ArmPhaseOnly:
		return false, true, nil
	case ArmCPUOnly:
		return true, false, nil
	case ArmNeither:
		return false, false, nil
	}
	return false, false, fmt.Errorf("unknown arm %q (want %s)", arm, strings.Join(Arms, ", "))
}

// Check says what is wrong with the options.
func (o Options) Check() error {
	switch {
	case o.Streams < 1 || o.Streams > 16:
		return fmt.Errorf("streams %d: want 1..16", o.Streams)
	case o.Frames < 10 || o.Frames > 100000:
		return fmt.Errorf("frames %d: want 10..100000", o.Frames)
	case o.Work <= 0 || o.Work >= o.Phase:
		return fmt.Errorf("work %v: want more than 0 and less than the phase %v", o.Work, o.Phase)
	case o.CPU != "auto" && o.CPU != "deadline" && o.CPU != "fifo":
		return fmt.Errorf("cpu %q: want auto, deadline or fifo", o.CPU)
	case o.Hogs < -1 || o.Hogs > 64:
		return fmt.Errorf("hogs %d: want -1 (none), 0 (two per CPU) or up to 64", o.Hogs)
	}
	for _, a := range o.Arms {
		if _, _, err := armParts(a); err != nil {
			return err
		}
	}
	_, err := pacer.New(o.config(true))
	return err
}

// config is the pacer's config for an arm with or without the phase.
func (o Options) config(phase bool) pacer.Config {
	cfg := pacer.Config{Slot: o.Slot}
	for i := range o.Streams {
		s := pacer.Stream{Name: fmt.Sprintf("s%d", i), Period: o.Period, Packets: o.Packets, X: o.X, Y: o.Y}
		if phase {
			s.Phase = o.Phase
		}
		cfg.Streams = append(cfg.Streams, s)
	}
	return cfg
}

// Arm is one arm's outcome, summed over its streams.
type Arm struct {
	Name     string `json:"name"`
	Deadline bool   `json:"deadline"`
	// CPU is the producers' policy in an arm with a CPU deadline.
	CPU string `json:"cpu,omitempty"`
	// DeadlineRefused says why the producers ran as ordinary threads in
	// an arm that asked for SCHED_DEADLINE ("": they did not).
	DeadlineRefused string        `json:"deadline_refused,omitempty"`
	Phase           time.Duration `json:"phase"`
	LMax            time.Duration `json:"l_max"`
	Frames          int64         `json:"frames"`
	Missed          int64         `json:"missed"`
	Windows         int64         `json:"windows"`
	Violations      int64         `json:"window_violations"`
	MaxMissRun      int64         `json:"max_miss_run"`
	Sent            int64         `json:"sent"`
	Dropped         int64         `json:"dropped"`
	Late            int64         `json:"late"`
	Received        int64         `json:"received"`
	// Skipped frames a producer never made: a deadline producer's job
	// ran out of runtime and ended in a later period, or the run's time
	// ran out before the producer got to them.
	Skipped int64 `json:"skipped"`
	// Ready: when frames were ready, after their release (the CPU side).
	ReadyP99 time.Duration `json:"ready_p99"`
	ReadyMax time.Duration `json:"ready_max"`
	// Start: when packets started, after their frame's release (the
	// pacer's slots); Arrive: when they arrived at the receiver (kernel
	// timestamps).
	StartMax    time.Duration `json:"start_max"`
	ArriveP99   time.Duration `json:"arrive_p99"`
	ArriveMax   time.Duration `json:"arrive_max"`
	PacerLate   int64         `json:"pacer_late_slots"`
	PacerMaxLag time.Duration `json:"pacer_max_lag"`
}

// Result is an experiment's.
type Result struct {
	Host    string  `json:"host"`
	Options Options `json:"options"`
	MinUtil float64 `json:"min_utilization"`
	Arms    []Arm   `json:"arms"`
}

// Markdown writes the result as a table.
func (r Result) Markdown(w io.Writer) {
	o := r.Options
	fmt.Fprintf(w, "%s. %d streams, T = %v, %d packets of 1200 B a frame in %v slots, x/y = %d/%d (minimum utilisation %.0f %% of the link), %v of CPU a frame, %d busy loops, %d frames a stream.\n\n",
		r.Host, o.Streams, o.Period, o.Packets, o.Slot, o.X, o.Y, 100*r.MinUtil, o.Work, o.Hogs, o.Frames)
	fmt.Fprintln(w, "| arm | CPU | phase Θ | frames missed | windows violated | longest miss run | ready p99 / max | start max (l_max) | arrival p99 / max | packets dropped / late / received |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, a := range r.Arms {
		cpu := "ordinary (CFS)"
		if a.Deadline {
			cpu = a.CPU
		}
		if a.DeadlineRefused != "" {
			cpu = "ordinary (deadline refused: " + a.DeadlineRefused + ")"
		}
		missed := fmt.Sprintf("%d of %d (%.1f %%)", a.Missed, a.Frames, pct(a.Missed, a.Frames))
		if a.Skipped > 0 {
			missed += fmt.Sprintf(", %d never made", a.Skipped)
		}
		fmt.Fprintf(w, "| %s | %s | %v | %s | %d of %d | %d | %v / %v | %v (%v) | %v / %v | %d / %d / %d |\n",
			a.Name, cpu, a.Phase, missed, a.Violations, a.Windows, a.MaxMissRun,
			ms(a.ReadyP99), ms(a.ReadyMax), ms(a.StartMax), a.LMax, ms(a.ArriveP99), ms(a.ArriveMax), a.Dropped, a.Late, a.Received)
	}
}

func pct(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

func ms(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }
