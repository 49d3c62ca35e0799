package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/api/client"
	"github.com/lanes-qos/lanes/internal/buildinfo"
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

// Exit statuses: scripts can tell why lanes failed without reading its
// message. lanes run has its own for the command (125, 126, 127).
const (
	ExitFailure  = 1 // anything else: the daemon failed, the kernel refused
	ExitBadInput = 2 // the command line, a config file or a request was wrong
	ExitNoDaemon = 3 // no lanesd answers on the socket
	ExitRefused  = 4 // the caller may not do this (not root, lane not granted, socket access)
)

// Run runs the lanes CLI with args (without the program name) and returns
// the process exit status.
func Run(args []string, opts Options) int {
	root, g := newRoot(opts)
	root.AddCommand(opts.Extra...)
	usageErrors(root)
	root.SetArgs(args)
	root.SetOut(Stdout)
	root.SetErr(Stderr)
	err := root.ExecuteContext(context.Background())
	if err == nil {
		return 0
	}
	code, msg := exitCode(err)
	// An unknown command or flag stops cobra before it parses --json.
	if g.json || slices.Contains(args, "--json") {
		printJSON(jsonError{Error: msg, Code: client.Code(err), Exit: code})
	} else if msg != "" {
		fmt.Fprintf(Stderr, "lanes: %s\n", msg)
	}
	return code
}

// jsonError is what --json prints for a failure, on stdout.
type jsonError struct {
	Error string `json:"error"`
	Code  string `json:"code,omitempty"` // the daemon's error code (api.Code*)
	Exit  int    `json:"exit"`
}

// exitCode classifies err into an exit status, with the message to print
// ("" for an ExitError that carries none).
func exitCode(err error) (int, string) {
	var ee *ExitError
	if errors.As(err, &ee) {
		if ee.Err == nil {
			return ee.Code, ""
		}
		return ee.Code, ee.Err.Error()
	}
	msg := err.Error()
	switch {
	case errors.Is(err, client.ErrNoDaemon):
		return ExitNoDaemon, msg
	case errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM):
		return ExitRefused, msg + " (the socket's group is daemon.socket_gid; ask root to add you to it)"
	}
	if strings.HasPrefix(msg, "unknown command") {
		return ExitBadInput, msg
	}
	switch client.Code(err) {
	case api.CodeForbidden:
		return ExitRefused, msg
	case api.CodeBadRequest, api.CodeUnknownLane, api.CodeNoProcess, api.CodeConfig:
		return ExitBadInput, msg
	}
	return ExitFailure, msg
}

// usageErrors makes every command's argument and flag errors exit with
// ExitBadInput, as unknown commands do.
func usageErrors(c *cobra.Command) {
	c.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &ExitError{Code: ExitBadInput, Err: err} })
	if args := c.Args; args != nil {
		c.Args = func(cmd *cobra.Command, a []string) error {
			if err := args(cmd, a); err != nil {
				return &ExitError{Code: ExitBadInput, Err: fmt.Errorf("%s: %w (see lanes %s --help)", cmd.CommandPath(), err, strings.TrimPrefix(cmd.CommandPath(), "lanes "))}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		usageErrors(sub)
	}
}

func newRoot(opts Options) (*cobra.Command, *globals) {
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
		Version:       buildinfo.String("lanes"),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.PersistentFlags().StringVar(&g.socket, "socket", envOr("LANES_SOCKET", api.DefaultSocket), "lanesd's socket (env LANES_SOCKET)")
	root.AddCommand(
		newRunCmd(g), newMoveCmd(g), newLsCmd(g), newPsCmd(g), newStatusCmd(g),
		newDoctorCmd(g), newConfigCmd(g), newReloadCmd(g), newContactCmd(g), newVersionCmd(g),
		newEventsCmd(g), newReportCmd(g), newManCmd(),
	)
	// Every command takes --json, errors included (printed on stdout as
	// {"error", "code", "exit"}); a command's own --json says what it
	// prints on success.
	root.PersistentFlags().BoolVar(&g.json, "json", false, "print JSON: results, and errors as {\"error\", \"code\", \"exit\"} on stdout")
	return root, g
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

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of this client (lanes --version is the same)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if g.json {
				return printJSON(map[string]string{"name": "lanes", "version": api.Version, "commit": buildinfo.Commit(), "go": runtime.Version()})
			}
			fmt.Fprintln(Stdout, buildinfo.String("lanes"))
			return nil
		},
	}
}
