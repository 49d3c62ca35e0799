package cli

import (
	"fmt"
	"time"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/lane"
)

// printReserve prints each reserved lane: its reservation, how it is
// enforced, whether it runs beyond it now, and what it got; then the tick
// assist of those under CFS bandwidth.
func printReserve(rs []api.ReserveLane, a *api.ReserveAssist) {
	fmt.Fprintln(Stdout, "reserve:")
	for _, r := range rs {
		mech := r.Mechanism
		if r.Why != "" {
			mech += " (" + r.Why + ")"
		}
		fmt.Fprintf(Stdout, "  %s: %g%% of a CPU by %s; %s; using %.2f CPUs, waiting %.2f, host idle %.2f; %d threads, %d mode changes, %d runtime splits, %d stalls\n",
			r.Lane, r.Percent, mech, r.Mode, r.Usage, r.Wait, r.HostIdle, r.Threads, r.Changes, r.Splits, r.Stalls)
		if r.Error != "" {
			fmt.Fprintf(Stdout, "    last error: %s\n", r.Error)
		}
	}
	switch {
	case a == nil:
	case a.Every <= 0:
		fmt.Fprintf(Stdout, "  tick assist: none (%s)\n", a.Why)
	default:
		state := "idle"
		if a.Running {
			state = fmt.Sprintf("running on CPUs %v", a.CPUs)
		}
		cost := 0.0
		if a.Ran > 0 {
			cost = 100 * a.CPUTime.Seconds() / a.Ran.Seconds()
		}
		fmt.Fprintf(Stdout, "  tick assist: every %v, %s (%s); %d starts, ran %v on up to %d CPUs, using %.2f%% of a CPU meanwhile\n",
			a.Every, state, a.Why, a.Starts, a.Ran.Round(time.Millisecond), a.MostCPUs, cost)
		if a.Error != "" {
			fmt.Fprintf(Stdout, "    not started: %s\n", a.Error)
		}
	}
}

// printSpeed prints each lane whose send rate is held by its CPU share.
func printSpeed(ss []api.SpeedLane) {
	fmt.Fprintln(Stdout, "send rate by CPU share:")
	for _, s := range ss {
		fmt.Fprintf(Stdout, "  %s: %s wanted, %s sent; CPU share %.1f%% of a CPU (at most %g%%), using %.1f%%\n",
			s.Lane, lane.FormatRate(uint64(s.Target)), lane.FormatRate(uint64(s.Rate)), s.Share, s.Max, s.Use)
		if s.Error != "" {
			fmt.Fprintf(Stdout, "    last error: %s\n", s.Error)
		}
	}
}
