package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lanes-qos/lanes/api"
)

func newContactCmd(g *globals) *cobra.Command {
	var lanes []string
	cmd := &cobra.Command{
		Use:   "contact up|down [--lane LANE]...",
		Short: "Tell lanesd that a contact began or ended (root only): boosting lanes boost their communicating processes",
		Long: `A lane with a boost policy ([lanes.NAME.boost], seed 000) raises the CPU
priority of its processes that communicate during a contact: a period in which
a network is up after being down. lanesd starts and ends contacts by itself
when the host's connectivity changes (a default route through a usable link
appears or goes). 'lanes contact' is for contacts lanes cannot see: an
emulated link's on/off schedule, a mobility model, a radio that queues while
out of range.

  lanes contact up                  every boosting lane
  lanes contact down --lane sync    one lane

A lane named must exist and have a boost policy, and to begin a contact have
processes; otherwise nothing changes and the error says which.`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"up", "down"},
		RunE: func(cmd *cobra.Command, args []string) error {
			var up bool
			switch args[0] {
			case "up":
				up = true
			case "down":
			default:
				return &ExitError{Code: ExitBadInput, Err: fmt.Errorf("contact: %q: want up or down", args[0])}
			}
			r, err := g.client().Contact(cmd.Context(), up, lanes)
			if err != nil {
				return fmt.Errorf("contact: %w", needDaemon(err))
			}
			if g.json {
				return printJSON(r)
			}
			fmt.Fprintf(Stdout, "contact %s for %s", args[0], strings.Join(r.Lanes, ", "))
			if r.Changed > 0 {
				fmt.Fprintf(Stdout, ": %d process(es) got their own priority back", r.Changed)
			}
			fmt.Fprintln(Stdout)
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&lanes, "lane", "l", nil, "only this boosting lane (repeat for more)")
	cmd.RegisterFlagCompletionFunc("lane", g.completeLane)
	addJSON(cmd, g)
	return cmd
}

// printBoost prints each boosting lane: its policy, whether a contact is
// on, and the processes holding a boost.
func printBoost(bs []api.BoostLane) {
	fmt.Fprintln(Stdout, "boost:")
	for _, b := range bs {
		contact := "no contact"
		if b.Contact {
			contact = "in contact"
		}
		if b.Source != "" {
			contact += " (from " + b.Source + ")"
		}
		fmt.Fprintf(Stdout, "  %s: %s; %s\n", b.Lane, b.Policy, contact)
		for _, p := range b.Boosted {
			fmt.Fprintf(Stdout, "    pid %d: nice %d (its own %d), %g counted\n", p.PID, p.Nice, p.Orig, p.Progress)
		}
	}
}
