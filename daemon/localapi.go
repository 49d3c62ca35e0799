package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/api/peercred"
	"github.com/lanes-qos/lanes/autorate"
	"github.com/lanes-qos/lanes/cpu"
	"github.com/lanes-qos/lanes/disk"
	"github.com/lanes-qos/lanes/diskidle"
	"github.com/lanes-qos/lanes/enforce"
	"github.com/lanes-qos/lanes/internal/features"
	"github.com/lanes-qos/lanes/lane"
	"github.com/lanes-qos/lanes/monitor"
	"github.com/lanes-qos/lanes/netsched"
)

type ctxKey struct{}

// connContext attaches the peer's credentials to every request of a connection.
func connContext(ctx context.Context, c net.Conn) context.Context {
	cr, err := peercred.Get(c)
	if err != nil {
		// No credentials: treat as the least privileged caller.
		cr = peercred.Creds{PID: -1, UID: -1, GID: -1}
	}
	return context.WithValue(ctx, ctxKey{}, cr)
}

func creds(r *http.Request) peercred.Creds {
	c, ok := r.Context().Value(ctxKey{}).(peercred.Creds)
	if !ok {
		return peercred.Creds{PID: -1, UID: -1, GID: -1}
	}
	return c
}

// route is one entry of the route table.
type route struct {
	method string
	// write routes change state; the handler checks what the caller may change.
	write bool
	fn    func(d *Daemon, w http.ResponseWriter, r *http.Request) (any, *api.Error)
}

// routes is the whole local API. Keep sorted by path (TestRoutesSorted).
var routes = []struct {
	path string
	route
}{
	{api.RouteContact, route{http.MethodPost, true, (*Daemon).serveContact}},
	{api.RouteDirectives, route{http.MethodGet, false, (*Daemon).serveDirectives}},
	{api.RouteDoctor, route{http.MethodGet, false, (*Daemon).serveDoctor}},
	{api.RouteEvents, route{http.MethodGet, false, (*Daemon).serveEvents}},
	{api.RouteLanes, route{http.MethodGet, false, (*Daemon).serveLanes}},
	{api.RouteMove, route{http.MethodPost, true, (*Daemon).serveMove}},
	{api.RouteProcs, route{http.MethodGet, false, (*Daemon).serveProcs}},
	{api.RouteReload, route{http.MethodPost, true, (*Daemon).serveReload}},
	{api.RouteReport, route{http.MethodPost, true, (*Daemon).serveReport}},
	{api.RouteStatus, route{http.MethodGet, false, (*Daemon).serveStatus}},
}

func (d *Daemon) handler() http.Handler {
	mux := http.NewServeMux()
	seen := map[string]bool{}
	for _, rt := range routes {
		if seen[rt.path] {
			panic("duplicate local API route " + rt.path)
		}
		seen[rt.path] = true
		rt := rt
		mux.HandleFunc(rt.path, func(w http.ResponseWriter, r *http.Request) {
			if r.Method != rt.method {
				writeErr(w, api.Errorf(api.CodeMethod, "%s %s: use %s", r.Method, rt.path, rt.method))
				return
			}
			out, aerr := rt.fn(d, w, r)
			if d.metrics != nil {
				code := http.StatusOK
				if aerr != nil {
					code = status(aerr.Code)
				}
				d.metrics.APIRequests.WithLabelValues(rt.path, strconv.Itoa(code)).Inc()
			}
			if aerr != nil {
				if rt.write {
					c := creds(r)
					d.logf("api: %s %s by uid %d pid %d refused: %s", r.Method, rt.path, c.UID, c.PID, aerr.Message)
				}
				writeErr(w, aerr)
				return
			}
			if _, ok := out.(streamed); ok {
				return // a stream wrote its response
			}
			writeJSON(w, http.StatusOK, out)
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeErr(w, api.Errorf(api.CodeNotFound, "no such API route %s (this daemon serves /v1/)", r.URL.Path))
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(api.VersionHeader, api.Version)
		// The API is for local programs, never for browsers.
		if o, ref := r.Header.Get("Origin"), r.Header.Get("Referer"); o != "" || ref != "" {
			c := creds(r)
			d.logf("api: %s %s by uid %d pid %d refused: a browser's request (Origin %q, Referer %q)", r.Method, r.URL.Path, c.UID, c.PID, o, ref)
			writeErr(w, api.Errorf(api.CodeForbidden, "requests from browsers are refused"))
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func status(code string) int {
	switch code {
	case api.CodeBadRequest, api.CodeConfig:
		return http.StatusBadRequest
	case api.CodeUnknownLane, api.CodeNoProcess, api.CodeNotFound:
		return http.StatusNotFound
	case api.CodeForbidden:
		return http.StatusForbidden
	case api.CodeMethod:
		return http.StatusMethodNotAllowed
	}
	return http.StatusInternalServerError
}

func writeErr(w http.ResponseWriter, e *api.Error) { writeJSON(w, status(e.Code), e) }

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// maxBody is the largest request body the API reads.
const maxBody = 1 << 20

// readBody reads a request body of at most maxBody bytes.
func readBody(r *http.Request) ([]byte, *api.Error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return nil, api.Errorf(api.CodeBadRequest, "bad request body: %v", err)
	}
	if len(body) > maxBody {
		return nil, api.Errorf(api.CodeBadRequest, "bad request body: larger than %d bytes", maxBody)
	}
	return body, nil
}

// decode parses a request body: exactly one JSON object of v's type, with
// no unknown field and nothing but white space after it.
func decode(body []byte, v any) *api.Error {
	if len(body) > maxBody {
		return api.Errorf(api.CodeBadRequest, "bad request body: larger than %d bytes", maxBody)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return api.Errorf(api.CodeBadRequest, "bad request body: %v", err)
	}
	if rest := bytes.TrimSpace(body[dec.InputOffset():]); len(rest) > 0 {
		shown := string(rest)
		if len(shown) > 40 {
			shown = shown[:40] + "..."
		}
		return api.Errorf(api.CodeBadRequest, "bad request body: trailing data after the request object at byte %d: %q", len(body)-len(rest), shown)
	}
	return nil
}

// parseMove parses and validates the body of POST /v1/move: PIDs given,
// each positive and given once, and a lane name (whether the lane exists
// is the config's to say).
func parseMove(body []byte) (api.MoveRequest, *api.Error) {
	var req api.MoveRequest
	if e := decode(body, &req); e != nil {
		return req, e
	}
	if len(req.PIDs) == 0 {
		return req, api.Errorf(api.CodeBadRequest, "no PIDs given")
	}
	if req.Lane == "" {
		return req, api.Errorf(api.CodeBadRequest, "no lane given")
	}
	seen := make(map[int]bool, len(req.PIDs))
	for _, pid := range req.PIDs {
		if pid <= 0 || pid > maxPID {
			return req, api.Errorf(api.CodeBadRequest, "invalid PID %d", pid)
		}
		if seen[pid] {
			return req, api.Errorf(api.CodeBadRequest, "PID %d given twice", pid)
		}
		seen[pid] = true
	}
	return req, nil
}

// maxPID is the largest PID Linux can give (PID_MAX_LIMIT, 2^22).
const maxPID = 1 << 22

// parseReload validates the body of POST /v1/reload: empty, or an empty
// JSON object (what the client sends).
func parseReload(body []byte) *api.Error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	var req struct{}
	return decode(body, &req)
}

func (d *Daemon) serveMove(w http.ResponseWriter, r *http.Request) (any, *api.Error) {
	resp, laneName, aerr := d.move(r)
	if d.metrics != nil {
		d.countMove(laneName, len(resp.Moved), aerr)
	}
	if aerr != nil {
		return nil, aerr
	}
	return resp, nil
}

// move carries out a move request; laneName is the lane it named, ""
// when the request could not be read or named no lane of the config (so
// that the metrics' lane label takes only the config's names).
func (d *Daemon) move(r *http.Request) (resp api.MoveResponse, laneName string, aerr *api.Error) {
	body, e := readBody(r)
	if e != nil {
		return resp, "", e
	}
	req, e := parseMove(body)
	if e != nil {
		return resp, "", e
	}
	cfg := d.config()
	l, err := cfg.Lane(req.Lane)
	if err != nil {
		return resp, "", api.Errorf(api.CodeUnknownLane, "%v", err)
	}
	c := creds(r)
	if !c.IsRoot() && !l.Unprivileged {
		return resp, l.Name, api.Errorf(api.CodeForbidden, "lane %q is not granted to unprivileged users (uid %d): only root may use it", l.Name, c.UID)
	}
	for _, pid := range req.PIDs {
		if _, err := enforce.ReadProc(pid); err != nil {
			return resp, l.Name, api.Errorf(api.CodeNoProcess, "%v", err)
		}
	}
	var check enforce.Check
	if !c.IsRoot() {
		check = moveCheck(cfg, l, c.UID)
	}
	check = keepServices(d.engine, l, c.PID, check)
	// A requested process's scope moves whole (not the caller's own: lanes
	// run must not take the caller's terminal along).
	var asked, self []int
	for _, pid := range req.PIDs {
		if pid == c.PID {
			self = append(self, pid)
		} else {
			asked = append(asked, pid)
		}
	}
	pids, units := d.engine.WithUnits(asked)
	pids = append(pids, self...)
	moved, err := d.engine.MoveChecked(pids, l, "move", check)
	if err != nil {
		var f *forbidden
		if errors.As(err, &f) {
			return resp, l.Name, api.Errorf(api.CodeForbidden, "%v (nothing was moved)", err)
		}
		if errors.Is(err, enforce.ErrNoProcess) {
			return resp, l.Name, api.Errorf(api.CodeNoProcess, "%v (nothing was moved)", err)
		}
		return resp, l.Name, api.Errorf(api.CodeInternal, "%v (nothing was moved)", err)
	}
	d.logf("api: uid %d moved %v to %s", c.UID, moved, l.Name)
	resp = api.MoveResponse{Lane: l.Name, Moved: moved}
	for _, u := range units {
		d.logf("api: moved the whole unit %s (%d processes) with process %d to %s", u.Unit, u.Procs, u.PID, l.Name)
		resp.Units = append(resp.Units, api.MovedUnit{Unit: u.Unit, PID: u.PID, Procs: u.Procs})
	}
	return resp, l.Name, nil
}

// keepServices adds to check, where systemd owns the cgroup tree, the
// refusal to take a process out of its systemd service or out of a
// delegated subtree (see enforce.SplitOf), except for the caller's own
// tree: a process that asks to move itself (lanes run, an application
// choosing its lane) has chosen to leave its unit.
func keepServices(e *enforce.Engine, l *lane.Lane, callerPID int, check enforce.Check) enforce.Check {
	if e.H.Units == nil {
		return check
	}
	return func(p enforce.Candidate) error {
		if p.Root != callerPID {
			if se := e.SplitOf(p.PID, p.From, l.Name); se != nil {
				return &forbidden{se.Error()}
			}
		}
		if check != nil {
			return check(p)
		}
		return nil
	}
}

// forbidden is a move check's refusal.
type forbidden struct{ msg string }

func (f *forbidden) Error() string { return f.msg }

// moveCheck decides, for a caller of uid (not root), on every process a
// move into lane "to" would change: the requested processes and each
// descendant that moves along. The caller must own it (real and effective
// uid), and it may not leave a lane that is root's only (unprivileged =
// false): that lane's limits are not the caller's to lift.
func moveCheck(cfg *lane.Config, to *lane.Lane, uid int) enforce.Check {
	return func(p enforce.Candidate) error {
		who := fmt.Sprintf("process %d", p.PID)
		if p.PID != p.Root {
			who = fmt.Sprintf("process %d (a descendant of %d, which would move with it)", p.PID, p.Root)
		}
		if p.Info.UID != uid || p.Info.EUID != uid {
			return &forbidden{fmt.Sprintf("%s belongs to uid %d (effective uid %d): uid %d may only move its own processes", who, p.Info.UID, p.Info.EUID, uid)}
		}
		if from := laneOfMembership(p.From); from != "" && from != to.Name {
			if fl, ok := cfg.Lanes[from]; ok && !fl.Unprivileged {
				return &forbidden{fmt.Sprintf("%s is in lane %q, which only root may move processes out of (uid %d)", who, from, uid)}
			}
		}
		return nil
	}
}

func (d *Daemon) serveReload(w http.ResponseWriter, r *http.Request) (any, *api.Error) {
	if c := creds(r); !c.IsRoot() {
		return nil, api.Errorf(api.CodeForbidden, "only root may reload the config (caller uid %d)", c.UID)
	}
	body, e := readBody(r)
	if e != nil {
		return nil, e
	}
	if e := parseReload(body); e != nil {
		return nil, e
	}
	cfg, err := d.reload()
	if err != nil {
		return nil, api.Errorf(api.CodeConfig, "%v (the running config is kept)", err)
	}
	return api.ReloadResponse{Config: d.configName(), Lanes: cfg.Order, Warnings: cfg.Warnings}, nil
}

func (d *Daemon) lanes() []api.Lane {
	cfg := d.config()
	d.applyMu.Lock()
	stats := d.netStats()
	out := make([]api.Lane, 0, len(cfg.Order))
	for _, name := range cfg.Order {
		l := d.describe(cfg, cfg.Lanes[name])
		l.NetCounters = d.netCounters(name, stats)
		out = append(out, l)
	}
	d.applyMu.Unlock()
	return out
}

func (d *Daemon) describe(cfg *lane.Config, l *lane.Lane) api.Lane {
	g := d.engine.Group(l.Name)
	al := api.Lane{
		Name: l.Name, Default: l.Name == cfg.Default, Unprivileged: l.Unprivileged,
		CPU:    api.CPUSettings{Weight: l.CPU.Weight, Idle: l.CPU.Idle, CapPercent: l.CPU.CapPercent},
		Disk:   api.DiskSettings{Class: string(l.Disk.Class), Level: l.Disk.Level, Weight: l.Disk.Weight},
		Net:    api.NetSettings{Priority: l.Net.Priority, Rate: l.Net.Rate, Ceil: l.Net.Ceil, Borrow: l.Net.Borrow},
		Cgroup: g.Name(),
	}
	al.Members, _ = d.engine.Members(l.Name)
	if al.Members == nil {
		al.Members = []int{}
	}
	if t, err := d.engine.CPU.Usage(g); err == nil {
		al.CPUTime = t
	}
	return al
}

func (d *Daemon) serveLanes(w http.ResponseWriter, r *http.Request) (any, *api.Error) {
	return api.LanesResponse{Lanes: d.lanes()}, nil
}

func (d *Daemon) serveProcs(w http.ResponseWriter, r *http.Request) (any, *api.Error) {
	recs, _ := d.engine.Records()
	var out []api.Proc
	cfg := d.config()
	for _, name := range cfg.Order {
		pids, _ := d.engine.Members(name)
		for _, pid := range pids {
			p := api.Proc{PID: pid, Lane: name, Why: "inherited"}
			if rec, ok := recs[pid]; ok {
				p.Why = rec.Why
			}
			if pi, err := enforce.ReadProc(pid); err == nil {
				p.Comm, p.UID, p.Threads = pi.Comm, pi.UID, pi.Threads
			}
			if c, lvl, err := disk.GetIOPrio(pid); err == nil {
				p.IOClass = string(c)
				if c != lane.IONone && c != lane.IOIdle {
					p.IOClass += "/" + strconv.Itoa(lvl)
				}
				if c == lane.IONone {
					p.IOClass = "none"
				}
			}
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	if out == nil {
		out = []api.Proc{}
	}
	return api.ProcsResponse{Procs: out}, nil
}

func (d *Daemon) mechanisms() []api.Mechanism {
	m := wireMechanisms(append(d.engine.Mechanisms(), diskidle.IdleMechanism(d.engine.H)))
	if d.boostView.Load() != nil || d.speedView.Load() != nil {
		m = append(m, wireMechanisms([]features.Mechanism{monitor.SocketsMechanism()})...)
	}
	if rm, err := cpu.ReserveMechanism(d.opts.ReserveMechanism, d.opts.ReserveTickAssist); err == nil {
		m = append(m, wireMechanisms([]features.Mechanism{rm})...)
	}
	m = append(m, wireMechanisms([]features.Mechanism{cpu.BoostMechanism()})...)
	d.applyMu.Lock()
	if pc := d.procCountMechanism(); pc != nil && d.metricsSrv != nil {
		m = append(m, *pc)
	}
	switch {
	case d.net == nil:
		m = append(m, api.Mechanism{Resource: "network", Backend: "off", OK: true,
			Reason: "no [net] rate in the config and no lane asks for a congestion control or marking"})
	case d.net.socketsOnly:
		m = append(m, api.Mechanism{Resource: "network", Backend: "per socket only: nothing shaped", OK: true,
			Reason: "no [net] rate in the config: lanes' sockets get their lane's congestion control and DSCP marking, no interface is shaped"})
		m = append(m, wireMechanisms(d.net.e.Mechanisms())...)
	default:
		m = append(m, wireMechanisms(d.net.e.Mechanisms())...)
		if a := d.config().Net.Auto; a != nil {
			what, within := "upload link", "upload "+lane.FormatRate(a.Law.Min[0])+".."+lane.FormatRate(a.Law.Max[0])
			if a.Law.Max[1] != 0 {
				what, within = "upload and download links", within+", download "+lane.FormatRate(a.Law.Min[1])+".."+lane.FormatRate(a.Law.Max[1])
			}
			probes := "ICMP timestamps (one-way delays; echo requests where unanswered)"
			if a.Probe == lane.ProbeEcho {
				probes = "echo requests (round trips)"
			}
			if r := d.net.auto; r != nil {
				switch r.pinger.Mode() {
				case netsched.PingTimestamp:
					probes = "ICMP timestamps (one-way delays)"
				case netsched.PingEcho:
					probes = "echo requests (round trips: a queue on either path counts for both)"
				}
			}
			mech := api.Mechanism{Resource: "net rate", Backend: "auto: follows the " + what + " from " + probes + " to " + a.Reflector.String(), OK: d.net.auto != nil, Preferred: true,
				Reason: "HTB root and lane classes changed in place within " + within}
			if d.net.auto == nil {
				mech.Backend = "auto: not running (lanes status says why)"
			}
			m = append(m, mech)
			if a.Delivery {
				dm := api.Mechanism{Resource: "net rate delivery", Backend: "BPF TCP iterator: the upload's own connections' delivery cuts the rate when the link slows", OK: true, Preferred: true,
					Reason: "read every " + autorate.FlowPeriod.String() + " while the upload is loaded"}
				if a.Law.Follow {
					dm.Backend = fmt.Sprintf("BPF TCP iterator: law %q, the upload's rate follows its own connections' delivery, held to a %v queue", lane.AutoLawFollow, a.Law.Target)
					dm.Reason = fmt.Sprintf("read every %v while the upload carries %.0f%% of its rate", autorate.FlowPeriod, 100*a.Law.MeterLoad())
				}
				if r := d.net.auto; r == nil {
					dm.Backend, dm.OK, dm.Reason = "none", false, "the auto rate does not run"
				} else if r.meterErr != nil {
					dm.Backend, dm.OK, dm.Reason = "none: the probes alone", false, r.meterErr.Error()
				}
				m = append(m, dm)
			}
		}
	}
	d.applyMu.Unlock()
	d.mu.Lock()
	m = append(m, d.eventsMech, d.settleMech)
	d.mu.Unlock()
	m = append(m, d.bridgeMechanism())
	return m
}

func wireMechanisms(ms []features.Mechanism) []api.Mechanism {
	out := make([]api.Mechanism, len(ms))
	for i, m := range ms {
		out[i] = api.Mechanism(m)
	}
	return out
}

func (d *Daemon) serveDoctor(w http.ResponseWriter, r *http.Request) (any, *api.Error) {
	return api.DoctorResponse{Kernel: features.KernelRelease(), Mechanisms: d.mechanisms()}, nil
}

func (d *Daemon) serveStatus(w http.ResponseWriter, r *http.Request) (any, *api.Error) {
	d.mu.Lock()
	st := api.Status{
		Version: api.Version, PID: os.Getpid(), Started: d.started,
		ConfigLoad: d.cfgLoaded, ConfigError: d.cfgErr,
		StateDB: d.store.Path(), Events: d.events, ConfigWarnings: d.cfg.Warnings,
	}
	for _, h := range d.health {
		st.Health = append(st.Health, h)
	}
	d.mu.Unlock()
	sort.Slice(st.Health, func(i, j int) bool { return st.Health[i].Code < st.Health[j].Code })
	st.Config = d.configName()
	st.Mechanisms = d.mechanisms()
	st.Lanes = d.lanes()
	st.Idletime = d.idleStats()
	st.Links = d.netLinks()
	st.Bus = d.busStats()
	st.Bridge = d.bridgeStatus()
	st.Controllers = d.controllerStatus()
	st.Boost = d.boostStatus()
	st.Reserve, st.ReserveAssist = d.reserveStatus()
	st.Speed = d.speedStatus()
	st.History = d.historyStatus()
	st.Reports = d.reports.list(creds(r), func(pid int) bool {
		_, err := os.Stat("/proc/" + strconv.Itoa(pid))
		return err == nil
	})
	return st, nil
}

// historyStatus is the event history's size and limits (nil: no history).
func (d *Daemon) historyStatus() *api.History {
	d.mu.Lock()
	cfg := d.cfg
	d.mu.Unlock()
	if cfg == nil || cfg.Events.History == 0 || d.store == nil {
		return nil
	}
	h := &api.History{Keep: cfg.Events.History, Retention: cfg.Events.Retention.String(), Topics: slices.Clone(cfg.Events.HistoryTopics)}
	n, oldest, err := d.store.EventCount()
	if err != nil {
		h.Error = err.Error()
	}
	h.Events, h.Oldest = n, oldest
	return h
}

// busStats is the event bus's counters for the status response.
func (d *Daemon) busStats() *api.EventBus {
	if d.bus == nil {
		return nil
	}
	bs := d.bus.Stats()
	out := &api.EventBus{Published: bs.Published, InvalidTopics: bs.InvalidTopics, Subscriptions: []api.EventSubscription{}}
	for _, s := range bs.Subscriptions {
		out.Subscriptions = append(out.Subscriptions, api.EventSubscription{
			Name: s.Name, Topics: s.Topics, Queue: s.Queue, Policy: s.Drop.String(), Queued: s.Queued,
			Delivered: s.Delivered, Dropped: s.Dropped, Expired: s.Expired, Filtered: s.Filtered, FilterErrors: s.FilterErrors,
		})
	}
	sort.Slice(out.Subscriptions, func(i, j int) bool { return out.Subscriptions[i].Name < out.Subscriptions[j].Name })
	return out
}
