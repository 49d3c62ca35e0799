package workload

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/lanes-qos/lanes/testbed/netns"
)

// Env is where a workload runs.
type Env struct {
	Topo *netns.Topology
	// Wrap is put in front of the command of the workload's client
	// process in src, e.g. {"/usr/bin/lanes", "run", "-l", "background",
	// "--"}. Go generators run inside this process and cannot be wrapped.
	Wrap []string
	// Gen is the command of a generator process, which gets a GenRequest
	// as JSON for its last argument and runs GenMain, e.g. {"/usr/bin/lanes",
	// "bench", "gen"}. The pulse and greedy senders run in it (and can then
	// be wrapped); without it they run in this process.
	Gen []string
	// Index numbers the workload within its scenario, for default ports.
	Index int
	Logf  func(format string, args ...any)
}

func (e Env) logf(format string, args ...any) {
	if e.Logf != nil {
		e.Logf(format, args...)
	}
}

// ends returns the namespaces and addresses of the workload's path: the
// client side (src) and the server side (dst).
func (e Env) ends(s Spec) (cliNS, srvNS string, cliAddr, srvAddr netip.Addr, err error) {
	if s.Path < 0 || s.Path >= len(e.Topo.Paths) {
		return "", "", netip.Addr{}, netip.Addr{}, fmt.Errorf("workload %s: path %d: topology has %d", s.Name, s.Path, len(e.Topo.Paths))
	}
	p := e.Topo.Paths[s.Path]
	return e.Topo.Src, e.Topo.Dst, p.SrcAddr, p.DstAddr, nil
}

func (e Env) port(s Spec) int {
	if s.Port != 0 {
		return s.Port
	}
	return 5201 + 10*e.Index
}

// Run runs the workload for dur and returns what it measured. Processes
// it starts are killed and reaped before it returns.
func Run(ctx context.Context, env Env, s Spec, dur time.Duration) (Result, error) {
	if err := s.Validate(); err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, dur+30*time.Second)
	defer cancel()
	var r Result
	var err error
	switch s.Kind {
	case IPerf3:
		r, err = runIPerf3(ctx, env, s, dur)
	case IRTT:
		r, err = runIRTT(ctx, env, s, dur)
	case Audio:
		r, err = runAudio(ctx, env, s, dur)
	case Video:
		r, err = runVideo(ctx, env, s, dur)
	case ReqResp:
		r, err = runReqResp(ctx, env, s, dur)
	case Fio:
		r, err = runFio(ctx, env, s, dur)
	case StressNG:
		r, err = runStressNG(ctx, env, s, dur)
	case Pulse:
		r, err = runPulse(ctx, env, s, dur)
	case Greedy:
		r, err = runGreedy(ctx, env, s, dur)
	}
	r.Name, r.Kind = s.Name, s.Kind
	if err != nil {
		return r, fmt.Errorf("workload %s (%s): %w", s.Name, s.Kind, err)
	}
	return r, nil
}

func noWrap(env Env, s Spec) error {
	if len(env.Wrap) > 0 {
		return fmt.Errorf("a Go generator runs inside the runner and cannot be wrapped by %q", env.Wrap)
	}
	return nil
}
