package proxycmd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/api/client"
	"github.com/lanes-qos/lanes/cmd/lanes/cli"
	"github.com/lanes-qos/lanes/internal/paths"
	"github.com/lanes-qos/lanes/intnw"
	"github.com/lanes-qos/lanes/intproxy"
)

// New returns the `lanes proxy` command.
func New() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "proxy client|server",
		Short: "Carry unmodified programs' TCP connections over several networks at once, labelled by their lane (Intentional Networking)",
		Long: `lanes proxy carries local TCP connections over a multi-socket: one logical
connection to a server end over every network this host has (Wi-Fi and
cellular, say), chosen per piece of traffic by what it is for (seed 002's
Intentional Networking). Each connection is labelled from the lane of the
process that opened it: an interactive lane's traffic is foreground small (the
network of least latency), a background lane's background large (striped,
and held back for a while after foreground traffic), any other foreground
large (the network of most bandwidth). Nothing in the programs changes.

The client end accepts SOCKS5 connections (--socks) and connections a
netfilter rule redirects to it (--transparent, with --redirect for the
rules it installs); the server end connects to each destination its
--allow list permits and carries the replies back.

  # on the server (one address per network the client may come from):
  lanes proxy server --listen :7000 --allow 198.18.20.0/24

  # on the client, two networks:
  sudo lanes proxy client \
    --path name=wifi,from=198.18.10.1,to=198.18.20.1:7000 \
    --path name=cell,from=198.18.11.1,to=198.18.21.1:7000 \
    --socks 127.0.0.1:1080 --transparent 127.0.0.1:1081 --redirect 198.18.20.0/24:80

  curl --socks5 127.0.0.1:1080 http://198.18.20.1/     # or, redirected:
  lanes run -l background -- curl http://198.18.20.1/big.iso`,
	}
	cmd.AddCommand(newClientCmd(), newServerCmd())
	return cmd
}

// proxyLog prints what a proxy end does, on stderr, with the time.
func proxyLog(quiet bool) func(string, ...any) {
	if quiet {
		return func(string, ...any) {}
	}
	return func(f string, a ...any) {
		fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(f, a...))
	}
}

func newServerCmd() *cobra.Command {
	var (
		listen string
		allow  []string
		quiet  bool
	)
	cmd := &cobra.Command{
		Use:   "server --listen ADDR:PORT --allow PREFIX[:PORTS]...",
		Short: "The server end: accept multi-sockets and connect their streams to allowed destinations",
		Long: `The server end listens for multi-sockets (every network of a client joins the
same one) and connects each stream to its destination if an --allow entry
covers it. A stream to any other destination is refused (SOCKS5's "not
allowed by ruleset"), the refusal says which destinations are allowed, and
the multi-socket carries on. A name (SOCKS5 with a host name) is resolved here
and must resolve to an allowed address. A client that sends what does not
parse is not speaking this protocol: its multi-socket is closed.

--allow takes an address or prefix and optionally a port or range:
198.18.20.0/24, 198.18.20.1:80, 198.18.20.0/24:8000-8100,
[2001:db8::/32]:443. Give 0.0.0.0/0 (and ::/0) to allow everything, which
makes this an open relay for whoever reaches --listen.`,
		Example: `  lanes proxy server --listen :7000 --allow 198.18.20.0/24 --allow 198.18.30.5:443`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var rules []intproxy.Rule
			for _, a := range allow {
				r, err := intproxy.ParseRule(a)
				if err != nil {
					return &cli.ExitError{Code: cli.ExitBadInput, Err: fmt.Errorf("proxy server: %w", err)}
				}
				rules = append(rules, r)
			}
			if len(rules) == 0 {
				return &cli.ExitError{Code: cli.ExitBadInput, Err: errors.New("proxy server: no --allow: give the destinations streams may reach (0.0.0.0/0 for any)")}
			}
			logf := proxyLog(quiet)
			lis, err := intnw.Listen(listen, &intnw.Options{Logf: logf})
			if err != nil {
				return fmt.Errorf("proxy server: %w", err)
			}
			defer lis.Close()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			logf("proxy server: listening on %v; allowed: %s", lis.Addr(), strings.Join(allow, ", "))
			srv := &intproxy.Server{Allow: rules, Options: intproxy.Options{Logf: logf}}
			err = srv.Serve(ctx, lis)
			if ctx.Err() != nil {
				logf("proxy server: stopped")
				return nil
			}
			return fmt.Errorf("proxy server: %w", err)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", ":7000", "address and port to listen on for multi-sockets")
	cmd.Flags().StringArrayVar(&allow, "allow", nil, "a destination streams may reach: PREFIX[:PORT[-PORT]] (repeat; required)")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "do not log streams and paths")
	return cmd
}

func newClientCmd() *cobra.Command {
	var (
		pathArgs    []string
		socks       string
		transparent string
		redirect    []string
		labels      []string
		config      string
		def         string
		every       time.Duration
		dialTimeout time.Duration
		quiet       bool
	)
	cmd := &cobra.Command{
		Use:   "client --path SPEC... [--socks ADDR] [--transparent ADDR --redirect PREFIX[:PORTS]...]",
		Short: "The client end: carry local connections over every network to the server end, labelled by lane",
		Long: `The client end opens a multi-socket to the server end over each --path (one
per network) and carries local TCP connections over it: those made to its
SOCKS5 listener (--socks) and those netfilter redirects to its transparent
listener (--transparent). With --redirect it installs the redirect rules
itself (nftables tables lanes_proxy_<port>, removed when it stops, replaced if
a crashed run left them): TCP connections this host opens to those
destinations, except to the server end's own addresses, go to the proxy.

--path is comma-separated KEY=VALUE: to=ADDRESS:PORT (the server end through
this network, required), name=NAME, from=ADDRESS (the local address whose
source routing picks the network), dev=DEVICE (bind to an interface) and
rate=RATE (the network's bandwidth until it is measured, e.g. 3mbit).

Labels: each connection's lane is the lanes group its socket was created in
(cgroup v2); the lane's network settings give the label (idletime or the
ledbat congestion control: bg-large; net priority 0: fg-small; else
fg-large), from lanesd's config (--config). --label LANE=LABEL overrides one
lane; --default labels processes in no lane. Labels: fg-small, fg-large,
bg-small, bg-large.

The paths' state is printed every --status-every, and, when lanesd answers
on --socket, reported to it as this process's metrics (path_<name>_up,
_rtt_ms, _mbit, _queued_kb: events on app.<pid>.report, which 'lanes events'
shows, and the last of them in 'lanes status').`,
		Example: `  sudo lanes proxy client --path name=wifi,from=198.18.10.1,to=198.18.20.1:7000 \
    --path name=cell,from=198.18.11.1,to=198.18.21.1:7000 --socks 127.0.0.1:1080`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bad := func(err error) error {
				return &cli.ExitError{Code: cli.ExitBadInput, Err: fmt.Errorf("proxy client: %w", err)}
			}
			var ps []intnw.Path
			for _, a := range pathArgs {
				p, err := intproxy.ParsePath(a)
				if err != nil {
					return bad(err)
				}
				ps = append(ps, p)
			}
			if len(ps) == 0 {
				return bad(errors.New("no --path: give one per network (--path to=SERVER:PORT,from=LOCAL)"))
			}
			if socks == "" && transparent == "" {
				return bad(errors.New("neither --socks nor --transparent: nothing would be carried"))
			}
			var rules []intproxy.Rule
			for _, r := range redirect {
				rule, err := intproxy.ParseRule(r)
				if err != nil {
					return bad(err)
				}
				rules = append(rules, rule)
			}
			if every <= 0 {
				return bad(fmt.Errorf("--status-every %v: want a positive duration", every))
			}
			if dialTimeout <= 0 {
				return bad(fmt.Errorf("--dial-timeout %v: want a positive duration", dialTimeout))
			}
			if len(rules) > 0 && transparent == "" {
				return bad(errors.New("--redirect needs --transparent (the listener the rules redirect to)"))
			}
			dl, err := intnw.ParseLabel(def)
			if err != nil {
				return bad(fmt.Errorf("--default: %w", err))
			}
			cfg, _, err := paths.LoadConfig(config)
			if err != nil {
				return bad(err)
			}
			lm, err := intproxy.Labels(cfg, labels)
			if err != nil {
				return bad(err)
			}
			logf := proxyLog(quiet)
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			for _, m := range intproxy.Mechanisms() {
				logf("proxy client: %s: %s (%s)", m.Resource, m.Backend, m.Reason)
			}

			// Listeners first: a port in use fails before any network is used.
			var socksLn, transLn net.Listener
			if socks != "" {
				if socksLn, err = net.Listen("tcp", socks); err != nil {
					return bad(fmt.Errorf("--socks: %w", err))
				}
				defer socksLn.Close()
			}
			if transparent != "" {
				if transLn, err = net.Listen("tcp", transparent); err != nil {
					return bad(fmt.Errorf("--transparent: %w", err))
				}
				defer transLn.Close()
			}
			dctx, cancel := context.WithTimeout(ctx, dialTimeout)
			conn, err := intnw.Dial(dctx, ps, &intnw.Options{Logf: logf})
			cancel()
			if err != nil {
				return fmt.Errorf("proxy client: %w", err)
			}
			defer conn.Close(2 * time.Second)
			ll := &intproxy.LaneLabeler{Labels: lm, Default: dl, Logf: logf}
			c := intproxy.NewClient(ctx, conn, ll.Label, intproxy.Options{Logf: logf})
			errc := make(chan error, 2)
			if socksLn != nil {
				logf("proxy client: SOCKS5 on %v", socksLn.Addr())
				go func() { errc <- c.ServeSOCKS(socksLn) }()
			}
			if transLn != nil {
				port := uint16(transLn.Addr().(*net.TCPAddr).Port)
				if len(rules) > 0 {
					var skip []netip.AddrPort
					for _, p := range ps {
						skip = append(skip, p.Remote)
					}
					undo, err := intproxy.Redirect(port, rules, skip)
					if err != nil {
						return fmt.Errorf("proxy client: %w", err)
					}
					defer func() {
						if err := undo(); err != nil {
							logf("proxy client: %v", err)
						}
					}()
					logf("proxy client: redirecting %s to %v (nftables table %s)", strings.Join(redirect, ", "), transLn.Addr(), intproxy.RedirectTable(port))
				}
				logf("proxy client: transparent on %v", transLn.Addr())
				go func() { errc <- c.ServeTransparent(transLn) }()
			}
			tick := time.NewTicker(every)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					logf("proxy client: stopping")
					return nil
				case <-c.Done():
					return fmt.Errorf("proxy client: the multi-socket ended: %v", conn.Err())
				case err := <-errc:
					if err != nil {
						return fmt.Errorf("proxy client: %w", err)
					}
				case <-tick.C:
					st := conn.Paths()
					logf("proxy client: %d streams; %s", c.Streams(), pathLine(st))
					reportPaths(ctx, socketOf(cmd), st)
				}
			}
		},
	}
	cmd.Flags().StringArrayVar(&pathArgs, "path", nil, "a network to the server end: to=ADDR:PORT[,name=NAME][,from=ADDR][,dev=DEV][,rate=RATE] (repeat)")
	cmd.Flags().StringVar(&socks, "socks", "", "address for the SOCKS5 listener, e.g. 127.0.0.1:1080")
	cmd.Flags().StringVar(&transparent, "transparent", "", "address for the transparent listener, e.g. 127.0.0.1:1081 (redirected connections)")
	cmd.Flags().StringArrayVar(&redirect, "redirect", nil, "redirect this host's TCP connections to PREFIX[:PORT[-PORT]] to the transparent listener (repeat)")
	cmd.Flags().StringArrayVar(&labels, "label", nil, "LANE=LABEL: the label of a lane's connections (repeat)")
	cmd.Flags().StringVar(&def, "default", "fg-large", "the label of connections from processes in no lane")
	cmd.Flags().StringVar(&config, "config", "", "lanesd's config, for the lanes' labels (default: lanesd's file, else the built-in lanes)")
	cmd.Flags().DurationVar(&every, "status-every", 10*time.Second, "how often to print and report the paths' state")
	cmd.Flags().DurationVar(&dialTimeout, "dial-timeout", 15*time.Second, "how long to wait for a first path to the server end before giving up")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "do not log streams and paths")
	return cmd
}

func pathLine(st []intnw.PathStatus) string {
	var b []string
	for _, p := range st {
		s := "down"
		if p.Up {
			s = fmt.Sprintf("up rtt %v %.2f Mbit/s", p.RTT.Round(time.Millisecond), p.Bandwidth/1e6)
			if p.Stalled {
				s += " stalled"
			}
		}
		b = append(b, p.Name+": "+s)
	}
	return strings.Join(b, "; ")
}

var metricName = regexp.MustCompile(`[^a-z0-9_]+`)

// reportPaths tells lanesd (if it answers) each path's state as this
// process's metrics.
func reportPaths(ctx context.Context, socket string, st []intnw.PathStatus) {
	req := api.ReportRequest{Metrics: map[string]float64{}}
	for _, p := range st {
		if len(req.Metrics) > 28 {
			break
		}
		n := "path_" + strings.Trim(metricName.ReplaceAllString(strings.ToLower(p.Name), "_"), "_")
		up := 0.0
		if p.Up && !p.Stalled {
			up = 1
		}
		req.Metrics[n+"_up"] = up
		req.Metrics[n+"_rtt_ms"] = float64(p.RTT) / float64(time.Millisecond)
		req.Metrics[n+"_mbit"] = p.Bandwidth / 1e6
		req.Metrics[n+"_queued_kb"] = float64(p.Queued) / 1000
	}
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, _ = client.New(socket).Report(rctx, req)
}

// socketOf is lanesd's socket as the root command's --socket gives it.
func socketOf(cmd *cobra.Command) string {
	if f := cmd.Flag("socket"); f != nil {
		return f.Value.String()
	}
	return api.DefaultSocket
}
