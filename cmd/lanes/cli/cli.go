package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/api/client"
	"github.com/lanes-qos/lanes/internal/features"
)

// Output streams; tests replace them.
var (
	Stdout io.Writer = os.Stdout
	Stderr io.Writer = os.Stderr
)

// ExitError carries a process exit status out of a subcommand.
type ExitError struct {
	Code int
	Err  error // nil: exit silently (the status says it all)
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

type globals struct {
	socket string
	json   bool
	probes []func() ([]features.Mechanism, error)
}

func (g *globals) client() *client.Client {
	c := client.New(g.socket)
	c.Warnf = func(f string, a ...any) { fmt.Fprintf(Stderr, f+"\n", a...) }
	return c
}

// Options are what cmd/lanes wires into the CLI.
type Options struct {
	// Extra are more subcommands (`bench`, which is not a client of the daemon).
	Extra []*cobra.Command
	// LocalProbes add mechanisms to `lanes doctor` when no daemon runs
	// (the network's, which this package does not link).
	LocalProbes []func() ([]features.Mechanism, error)
}

// Run runs the lanes CLI with args (without the program name) and returns
// the process exit status.
func Run(args []string, opts Options) int {
	root := newRoot(opts)
	root.AddCommand(opts.Extra...)
	root.SetArgs(args)
	root.SetOut(Stdout)
	root.SetErr(Stderr)
	err := root.ExecuteContext(context.Background())
	if err == nil {
		return 0
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		if ee.Err != nil {
			fmt.Fprintf(Stderr, "lanes: %v\n", ee.Err)
		}
		return ee.Code
	}
	fmt.Fprintf(Stderr, "lanes: %v\n", err)
	return 1
}

func newRoot(opts Options) *cobra.Command {
	g := &globals{probes: opts.LocalProbes}
	root := &cobra.Command{
		Use:   "lanes",
		Short: "Put work into lanes: interactive, normal, background, or your own",
		Long: `lanes says what a piece of work is for, and the host schedules its CPU, disk
(and network) accordingly. Built-in lanes: interactive, normal (the default)
and background (uses only idle capacity). lanesd (the daemon) owns the kernel
settings; this command talks to it over its local socket. Without a daemon,
'lanes run' applies the lane itself for the life of the command.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&g.socket, "socket", envOr("LANES_SOCKET", api.DefaultSocket), "lanesd's socket (env LANES_SOCKET)")
	root.AddCommand(
		newRunCmd(g), newMoveCmd(g), newLsCmd(g), newPsCmd(g), newStatusCmd(g),
		newDoctorCmd(g), newConfigCmd(g), newReloadCmd(g), newVersionCmd(),
		newEventsCmd(g), newReportCmd(g),
	)
	return root
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func addJSON(c *cobra.Command, g *globals) {
	c.Flags().BoolVar(&g.json, "json", false, "print JSON (fields may be added, never changed)")
}

func printJSON(v any) error {
	enc := json.NewEncoder(Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func table() *tabwriter.Writer { return tabwriter.NewWriter(Stdout, 0, 4, 2, ' ', 0) }

func needDaemon(err error) error {
	if errors.Is(err, client.ErrNoDaemon) {
		return fmt.Errorf("%w: start it with `sudo lanesd`", err)
	}
	return err
}

func joinInts(v []int, max int) string {
	var b strings.Builder
	for i, x := range v {
		if i == max {
			fmt.Fprintf(&b, " … (%d more)", len(v)-max)
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprint(&b, x)
	}
	if len(v) == 0 {
		return "-"
	}
	return b.String()
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of this client",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintf(Stdout, "lanes %s\n", api.Version)
			return nil
		},
	}
}
