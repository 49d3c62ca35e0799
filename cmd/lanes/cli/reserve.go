package cli

import (
	"fmt"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/lane"
)

// printReserve prints each reserved lane: its reservation, how it is
// enforced, whether it runs beyond it now, and what it got.
func printReserve(rs []api.ReserveLane) {
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
