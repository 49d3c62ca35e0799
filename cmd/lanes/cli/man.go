package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/lanes-qos/lanes/api"
)

// newManCmd writes the man pages of lanes and its subcommands (section 1)
// into a directory: the Debian package's (dist/deb). Hidden: a build step,
// not something users run.
func newManCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "gen-man DIR",
		Short:  "Write lanes' man pages (section 1) into DIR",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := os.MkdirAll(args[0], 0o755); err != nil {
				return err
			}
			root := cmd.Root()
			root.DisableAutoGenTag = true
			h := &doc.GenManHeader{Title: "LANES", Section: "1", Source: "lanes " + api.Version, Manual: "lanes manual"}
			if err := doc.GenManTree(root, h, args[0]); err != nil {
				return fmt.Errorf("gen-man: %w", err)
			}
			return nil
		},
	}
}
