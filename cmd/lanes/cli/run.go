package cli

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/lanes-qos/lanes/api/client"
	"github.com/lanes-qos/lanes/enforce"
	"github.com/lanes-qos/lanes/internal/paths"
)

// Exit statuses of `lanes run` when the command did not run, as env(1) and
// container runtimes use them.
const (
	exitRunFailed  = 125 // lanes could not apply the lane
	exitCannotExec = 126 // the command exists but could not be executed
	exitNotFound   = 127 // the command was not found
)

func newRunCmd(g *globals) *cobra.Command {
	var laneName, configPath string
	cmd := &cobra.Command{
		Use:   "run -l LANE [--] COMMAND [ARG...]",
		Short: "Run a command in a lane",
		Long: `Run COMMAND in LANE. Its threads, and every process it starts, are in the
lane. The exit status and signals pass through: lanes run exits as the command
does.

With lanesd running, lanes run asks it to put this process into the lane and
then becomes the command (exec). Without a daemon it needs root: it creates a
private group with the lane's settings from --config (or ` + paths.ConfigFile + `,
or the embedded defaults), runs the command inside, and removes everything it
created when the command exits.

Exit statuses of its own: 125 the lane could not be applied, 126 the command
could not be executed, 127 the command was not found.`,
		Example: `  lanes run -l background -- make -j8
  lanes run -l interactive -- firefox`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if laneName == "" {
				return &ExitError{Code: ExitBadInput, Err: errors.New("run: which lane? give -l LANE (e.g. -l background)")}
			}
			path, err := exec.LookPath(args[0])
			if err != nil {
				return &ExitError{Code: exitNotFound, Err: fmt.Errorf("run: command not found: %s", args[0])}
			}
			c := g.client()
			if _, err := c.Move(cmd.Context(), laneName, os.Getpid()); err == nil {
				err = syscall.Exec(path, args, os.Environ())
				return &ExitError{Code: exitCannotExec, Err: fmt.Errorf("run: exec %s: %w", path, err)}
			} else if !errors.Is(err, client.ErrNoDaemon) {
				return &ExitError{Code: exitRunFailed, Err: fmt.Errorf("run: %w", err)}
			}
			return runAlone(laneName, configPath, path, args)
		},
	}
	cmd.Flags().StringVarP(&laneName, "lane", "l", "", "lane to run the command in (required)")
	cmd.RegisterFlagCompletionFunc("lane", g.completeLane)
	cmd.Flags().StringVar(&configPath, "config", "", "config file for daemon-less runs (default "+paths.ConfigFile+" if it exists, else the embedded defaults)")
	cmd.Flags().SetInterspersed(false)
	return cmd
}

func runAlone(laneName, configPath, path string, args []string) error {
	cfg, _, err := paths.LoadConfig(configPath)
	if err != nil {
		return &ExitError{Code: exitRunFailed, Err: fmt.Errorf("run: %w", err)}
	}
	l, err := cfg.Lane(laneName)
	if err != nil {
		return &ExitError{Code: exitRunFailed, Err: fmt.Errorf("run: %w", err)}
	}
	if os.Geteuid() != 0 {
		return &ExitError{Code: exitRunFailed, Err: errors.New("run: no lanes daemon is running, and applying a lane without one needs root: start lanesd (sudo lanesd), or run this as root")}
	}
	child := exec.Command(path, args[1:]...)
	child.Args[0] = args[0]
	child.Stdin, child.Stdout, child.Stderr = os.Stdin, os.Stdout, os.Stderr
	// Catch signals before the child exists, so none is lost in between.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)
	alone, err := enforce.StartAlone(l, child, func(string, ...any) {})
	if err != nil {
		var ee *exec.Error
		if errors.As(err, &ee) || errors.Is(err, os.ErrPermission) {
			return &ExitError{Code: exitCannotExec, Err: fmt.Errorf("run: %w", err)}
		}
		return &ExitError{Code: exitRunFailed, Err: fmt.Errorf("run: %w", err)}
	}
	tty := term.IsTerminal(int(os.Stdin.Fd()))
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				// A terminal sends ^C and ^\ to the whole foreground
				// process group: the command has it already.
				if tty && (s == syscall.SIGINT || s == syscall.SIGQUIT) {
					continue
				}
				child.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	werr := child.Wait()
	close(done)
	if err := alone.Finish(); err != nil {
		fmt.Fprintf(Stderr, "lanes: run: %v\n", err)
	}
	return passThrough(child, werr)
}

var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH, syscall.SIGCONT, syscall.SIGTSTP}

// passThrough ends this process as the command ended: with its exit
// status, or killed by the same signal.
func passThrough(child *exec.Cmd, werr error) error {
	st := child.ProcessState
	if st == nil {
		return &ExitError{Code: exitRunFailed, Err: fmt.Errorf("run: %w", werr)}
	}
	ws, ok := st.Sys().(syscall.WaitStatus)
	if ok && ws.Signaled() {
		sig := ws.Signal()
		signal.Reset(sig)
		syscall.Kill(os.Getpid(), sig)
		// The signal is delivered asynchronously, to any thread: give it
		// time to end the process before falling back to the exit code
		// a shell would report (a slow machine lost this race).
		time.Sleep(2 * time.Second)
		return &ExitError{Code: 128 + int(sig)}
	}
	return &ExitError{Code: st.ExitCode()}
}
