package cli

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/lanes-qos/lanes/internal/paths"
)

// laneNames are the lanes a shell completes: the running daemon's, or,
// with none, those of the config lanesd would load.
func (g *globals) laneNames(ctx context.Context) []string {
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if ls, err := g.client().Lanes(ctx); err == nil {
		names := make([]string, 0, len(ls.Lanes))
		for _, l := range ls.Lanes {
			names = append(names, l.Name)
		}
		return names
	}
	if cfg, _, err := paths.LoadConfig(""); err == nil {
		return cfg.Order
	}
	return nil
}

// completeLane completes a lane name.
func (g *globals) completeLane(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	return g.laneNames(cmd.Context()), cobra.ShellCompDirectiveNoFileComp
}

// completeMove completes lanes move's arguments: after the first PID, the
// last argument may be the lane.
func (g *globals) completeMove(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) == 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp // a PID
	}
	return g.completeLane(cmd, args, toComplete)
}
