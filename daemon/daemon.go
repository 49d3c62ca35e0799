package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/bridge"
	"github.com/lanes-qos/lanes/enforce"
	"github.com/lanes-qos/lanes/events"
	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/internal/paths"
	"github.com/lanes-qos/lanes/lane"
	"github.com/lanes-qos/lanes/metrics"
	"github.com/lanes-qos/lanes/procwatch"
	"github.com/lanes-qos/lanes/state"
)

// Options are lanesd's process-global settings (its flags).
type Options struct {
	// ConfigPath is the config file; "" means paths.ConfigFile if it
	// exists, else the embedded defaults.
	ConfigPath string
	Socket     string // overrides the config's daemon.socket
	StateDir   string // overrides the config's daemon.state_dir
	// ReserveMechanism is how reservations are enforced: reserve.MechAuto
	// (""), MechDeadline or MechCFS.
	ReserveMechanism string
	// ReserveTickAssist is the tick assist of reservations under CFS
	// bandwidth: reserve.AssistAuto (""), AssistOff or a period.
	ReserveTickAssist string
	// MetricsCount is how a scrape counts the lanes' processes:
	// MetricsCountAuto ("": in the kernel where it can) or
	// MetricsCountProcs (from cgroup.procs, the fallback, for
	// benchmarks that compare the two).
	MetricsCount string
	// Logf logs what the daemon does (info); Warnf what went wrong that
	// it carries on with (warning; Logf when nil).
	Logf  func(format string, args ...any)
	Warnf func(format string, args ...any)
	// Debugf logs the detail of what the daemon changes (each thread a
	// reservation puts under SCHED_DEADLINE and gives back); nil: none.
	Debugf func(format string, args ...any)
}

// Daemon is a running lanesd.
type Daemon struct {
	// reports is the last QoS report of each process (status).
	reports lastReports

	opts   Options
	logf   func(string, ...any)
	store  *state.Store
	engine *enforce.Engine

	// applyMu serialises changes to the kernel (reconcile, reload, stop)
	// and guards net.
	applyMu sync.Mutex
	net     *network
	// diskIdle runs the disk preemption intervals ([disk.idletime]).
	diskIdle *idleRun
	// laneMon runs the lane monitors ([monitor]; lanemon.go).
	laneMon *laneMon
	// bus is the daemon's event channels: monitors publish on it,
	// controllers, the API's event streams and bridges subscribe.
	bus *events.Bus
	// bridge carries the bus to other hosts over NATS ([bridge]); nil
	// without one. bridgeMu guards it.
	bridgeMu sync.Mutex
	bridge   *bridge.Bridge
	// control is the running controllers (control.go), guarded by applyMu;
	// controlView the same for readers that do not take applyMu (status).
	control     *controlRun
	controlView atomic.Pointer[controlRun]
	// boost is the priority boosting of the lanes with a policy (under
	// applyMu), boostView the same for status; connUp is the host's
	// connectivity as the network monitor last reported it.
	boost *boostRun
	// boostDown is, by lane, when the link went down as the stopped
	// boost run's trackers knew it: the next run (a reload) goes on from
	// it. Under applyMu.
	boostDown map[string]time.Time
	boostView atomic.Pointer[boostRun]
	// reserve is the CPU reservations of the lanes with cpu.reserve
	// (under applyMu), reserveView the same for status.
	reserve     *reserveRun
	reserveView atomic.Pointer[reserveRun]
	// speed is rate by execution speed of the lanes with cpu.send_rate
	// (under applyMu), speedView the same for status.
	speed     *speedRun
	speedView atomic.Pointer[speedRun]
	connUp    atomic.Bool
	// ev is the event history writer and the API streams' lifetime.
	ev *eventsRun
	// metrics is the Prometheus metrics (nil in tests that build a bare
	// Daemon); metricsSrv serves them where [daemon] metrics says,
	// guarded by applyMu (metrics.go).
	metrics     *metrics.Set
	metricsSrv  *metrics.Server
	metricFiles map[string]*cgroup.StatFiles
	// procCount counts the lanes' processes for a scrape in the kernel
	// (loaded at the first scrape; nil where it cannot be, procCountErr
	// saying why, and cgroup.procs is read instead).
	procCount    *procwatch.Counter
	procCountErr error

	mu        sync.Mutex
	cfg       *lane.Config
	cfgPath   string // "" when running on embedded defaults
	cfgLoaded time.Time
	cfgErr    string
	started   time.Time
	events    string
	// procWatch is the BPF process events' source while it runs; exes
	// keeps the executables' paths it names (placer.go).
	procWatch atomic.Pointer[procwatch.Watch]
	exes      procwatch.ExePaths
	// placeLog gathers the rule placements' log lines (placelog.go).
	placeLog placeLog
	// groups turns the group ids of procwatch's exec events into
	// memberships (placer.go); nil reads /proc/PID/cgroup.
	groups *cgroup.MembershipCache
	// eventsMech and settleMech are the doctor's lines for the process
	// events' source and the placement check (setEvents).
	eventsMech, settleMech api.Mechanism
	health                 map[string]api.Health
	socketPath             string
}

func (o Options) paths(cfg *lane.Config) (socket, stateDir string) {
	socket, stateDir = o.Socket, o.StateDir
	if socket == "" {
		socket = cfg.Daemon.Socket
	}
	if socket == "" {
		socket = paths.Socket
	}
	if stateDir == "" {
		stateDir = cfg.Daemon.StateDir
	}
	if stateDir == "" {
		stateDir = paths.StateDir
	}
	return socket, stateDir
}

// Run runs lanesd until ctx is done or SIGINT/SIGTERM arrives, then
// restores the host. SIGHUP reloads the config.
func Run(ctx context.Context, opts Options) error {
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if os.Geteuid() != 0 {
		return errors.New("lanesd must run as root (it changes cgroups, I/O priorities and qdiscs)")
	}
	cfg, cfgPath, err := paths.LoadConfig(opts.ConfigPath)
	if err != nil {
		return fmt.Errorf("load config: %w", err)
	}
	// Signals are caught before lanesd changes anything: a SIGTERM while
	// it starts (its default action kills at once) would otherwise leave
	// groups, qdiscs and programs behind; caught, it waits in sigs and
	// stops lanesd, restoring the host, as soon as the start is done.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	socket, stateDir := opts.paths(cfg)
	ln, err := listen(socket, cfg.Daemon.SocketGID)
	if err != nil {
		return err
	}
	defer os.Remove(socket)
	defer ln.Close()

	store, eng, recovered, err := openHost(stateDir, logf)
	if err != nil {
		return err
	}
	defer store.Close()
	eng.SetDebugf(opts.Debugf)
	d := &Daemon{opts: opts, logf: logf, store: store, engine: eng, cfg: cfg, cfgPath: cfgPath,
		cfgLoaded: time.Now(), started: time.Now(), health: map[string]api.Health{}, socketPath: socket,
		bus: events.New(), groups: cgroup.NewMembershipCache(eng.H)}
	d.metrics = metrics.New(d.metricsSnapshot, api.Version)
	defer d.bus.Close()
	defer d.stopBridge() // before the bus closes
	if d.ev, err = d.startEvents(cfg); err != nil {
		return fmt.Errorf("event history: %w", err)
	}
	defer d.ev.stop()
	for code, msg := range recovered {
		d.setHealth(code, msg)
	}

	if err := d.reconcile(nil, cfg); err != nil {
		d.restore()
		return fmt.Errorf("apply config: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Subscribe to exec events before scanning the running processes, so
	// that none execs unseen in between.
	evDone := d.watchProcesses(ctx)
	d.applyRulesToRunning()
	stopNetMon := d.watchNetwork(ctx, "")
	d.applyBridge(cfg)
	d.applyMu.Lock()
	d.applyMetrics(cfg.Daemon.Metrics)
	d.applyMu.Unlock()
	defer d.stopMetrics()

	srv := &http.Server{
		Handler:     d.handler(),
		ConnContext: connContext,
		ReadTimeout: 30 * time.Second,
		ErrorLog:    nil,
	}
	srv.RegisterOnShutdown(d.ev.cancel) // event streams end
	srvErr := make(chan error, 1)
	go func() { srvErr <- srv.Serve(ln) }()
	logf("lanesd %s listening on %s (config %s, state %s)", api.Version, socket, d.configName(), store.Path())
	for _, w := range cfg.Warnings {
		d.warnf("config: %s", w)
	}
	d.notify("READY=1\nSTATUS=lanes " + strings.Join(cfg.Order, ", "))
	wdTick, wdStop, wd := watchdog()
	defer wdStop()
	if wd > 0 {
		logf("systemd watchdog: %v (pets every %v while the daemon can apply changes)", wd, wd/2)
	}
	hang, hangStop := debugHang()
	defer hangStop()

	var runErr error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case s := <-sigs:
			if s == syscall.SIGHUP {
				d.notifyReloading()
				if _, err := d.reload(); err != nil {
					d.warnf("reload: %v (keeping the running config)", err)
				}
				d.notify("READY=1\nSTATUS=lanes " + strings.Join(d.config().Order, ", "))
				continue
			}
			logf("%v: stopping", s)
			break loop
		case err := <-srvErr:
			runErr = fmt.Errorf("serve local API: %w", err)
			break loop
		case <-wdTick:
			if d.alive(wd / 2) {
				d.notify(sdWatchdog)
			} else {
				d.warnf("watchdog: changes to the kernel have been blocked for %v; not petting systemd's watchdog", wd/2)
			}
		case <-hang:
			d.warnf("debug hook (%s=1, SIGUSR2): the main loop stops here; the watchdog is no longer petted", debugHangEnv)
			<-ctx.Done() // only a kill ends this process now
		}
	}
	d.notify("STOPPING=1")
	cancel()
	shutCtx, c2 := context.WithTimeout(context.Background(), 5*time.Second)
	if err := srv.Shutdown(shutCtx); err != nil {
		// A connection still busy after 5 s (a stream writing to a
		// client that does not read) is closed, not waited for.
		logf("local API: %v: closing the remaining connections", err)
		srv.Close()
	}
	c2()
	<-evDone
	stopNetMon()
	d.stopMetrics() // no scrape reads the groups while they go
	if err := d.restore(); err != nil {
		logf("restore: %v", err)
		return errors.Join(runErr, fmt.Errorf("restore host: %w", err))
	}
	logf("restored the host; bye")
	return runErr
}

// listen opens the API socket: a live daemon on it is an error, a stale
// socket file is removed. Who may connect is set by socketAccess.
func listen(path string, gid int) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create socket dir: %w", err)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("another lanesd is already listening on %s", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := socketAccess(path, gid); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// socketAccess sets who may connect to the API socket: with gid -1 every
// user (mode 0666: what each may do is decided per request from its peer
// credentials), else root and the members of group gid (root:gid, 0660).
// The socket is closed to others (0600) while its group changes.
func socketAccess(path string, gid int) error {
	mode, group := os.FileMode(0o666), 0
	if gid >= 0 {
		mode, group = 0o660, gid
	}
	if err := os.Chmod(path, 0o600); err != nil {
		return fmt.Errorf("socket %s: %w", path, err)
	}
	if err := os.Chown(path, 0, group); err != nil {
		return fmt.Errorf("socket %s: give it to group %d (daemon.socket_gid): %w", path, group, err)
	}
	if err := os.Chmod(path, mode); err != nil {
		return fmt.Errorf("socket %s: %w", path, err)
	}
	return nil
}

// warnf logs a problem the daemon carries on with at warning level.
func (d *Daemon) warnf(format string, args ...any) {
	switch {
	case d.opts.Warnf != nil:
		d.opts.Warnf(format, args...)
	case d.logf != nil:
		d.logf(format, args...)
	}
}

func (d *Daemon) configName() string {
	if d.cfgPath == "" {
		return "<embedded defaults>"
	}
	return d.cfgPath
}

func (d *Daemon) config() *lane.Config {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cfg
}

func (d *Daemon) setHealth(code, msg string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if msg == "" {
		delete(d.health, code)
		return
	}
	d.health[code] = api.Health{Code: code, Message: msg}
}

// reconcile makes the kernel match cfg (old is the config in force, nil at
// start): the network trees when [net] rate is set; every lane's group with
// its settings and traffic class; groups of lanes that are gone (or
// leftovers of a crashed run) are emptied and removed.
func (d *Daemon) reconcile(old, cfg *lane.Config) error {
	d.applyMu.Lock()
	defer d.applyMu.Unlock()
	// Controllers stop (their knobs back at the configured values)
	// before the settings change, and start again on the new ones.
	d.stopControllers()
	d.stopLaneMon() // restarted with cfg once it is applied
	d.stopBoost()   // every boost undone; started again on cfg
	d.stopReserve() // every thread's own policy back; started again on cfg
	d.stopSpeed()   // the lanes' configured CPU back; started again on cfg
	if err := d.applyNet(cfg); err != nil {
		return err
	}
	d.unbindGone(old, cfg)
	recs, err := d.engine.Records()
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for _, name := range cfg.Order {
		want[d.engine.Group(name).Name()] = true
	}
	existing, err := d.engine.H.ListGroups(cgroup.Prefix)
	if err != nil {
		return err
	}
	for _, g := range existing {
		n := g.Name()
		if want[n] || strings.HasPrefix(n, enforce.RunGroupPrefix) {
			continue
		}
		d.logf("removing cgroup %s (no such lane in the config)", n)
		if err := d.engine.ReleaseLane(n, recs); err != nil {
			return err
		}
	}
	for _, name := range cfg.Order {
		l := cfg.Lanes[name]
		if _, err := d.engine.EnsureLane(l); err != nil {
			return err
		}
	}
	if err := d.applyDiskIdle(cfg); err != nil {
		return err
	}
	d.startControllers(cfg)
	d.startLaneMon(cfg)
	d.startBoost(cfg)
	d.startReserve(cfg)
	d.startSpeed(cfg)
	return nil
}

// reload rereads the config file. A bad file keeps the running config.
func (d *Daemon) reload() (*lane.Config, error) {
	d.mu.Lock()
	path := d.cfgPath
	d.mu.Unlock()
	if path == "" {
		path = d.opts.ConfigPath
	}
	var cfg *lane.Config
	var err error
	if path == "" {
		cfg, path, err = paths.LoadConfig("")
	} else if cfg, err = lane.Load(path); err == nil {
		err = cfg.CheckHost()
	}
	if err != nil {
		d.mu.Lock()
		d.cfgErr = err.Error()
		d.mu.Unlock()
		d.setHealth("config-invalid", "last reload failed, running config kept: "+err.Error())
		return nil, err
	}
	if err := d.reconcile(d.config(), cfg); err != nil {
		// Put the running config's lanes back as they were.
		d.reconcile(cfg, d.config())
		d.setHealth("config-apply-failed", err.Error())
		return nil, fmt.Errorf("apply %s: %w", path, err)
	}
	if gid := cfg.Daemon.SocketGID; gid != d.config().Daemon.SocketGID {
		if err := socketAccess(d.socketPath, gid); err != nil {
			d.setHealth("socket-access", err.Error())
			d.logf("reload: %v", err)
		} else {
			d.setHealth("socket-access", "")
		}
	}
	d.mu.Lock()
	d.cfg, d.cfgPath, d.cfgLoaded, d.cfgErr = cfg, path, time.Now(), ""
	d.mu.Unlock()
	d.setHealth("config-invalid", "")
	d.setHealth("config-apply-failed", "")
	d.logf("reloaded %s: lanes %s", d.configName(), strings.Join(cfg.Order, ", "))
	for _, w := range cfg.Warnings {
		d.warnf("config: %s", w)
	}
	d.applyRulesToRunning()
	d.applyBridge(cfg)
	if d.metrics != nil {
		d.applyMu.Lock()
		d.applyMetrics(cfg.Daemon.Metrics)
		d.applyMu.Unlock()
	}
	return cfg, nil
}

func (d *Daemon) restore() error {
	d.applyMu.Lock()
	defer d.applyMu.Unlock()
	d.stopControllers()
	d.stopLaneMon()
	d.stopBoost()
	d.stopReserve()
	d.stopSpeed()
	d.diskIdle.end()
	d.diskIdle = nil
	d.stopNet()
	return d.engine.RestoreAll()
}

// laneOfGroup returns the lane name of a lanes cgroup path ("" if the path
// is not a lanes group).
func laneOfGroup(path string) string {
	return cgroup.LaneOfGroup(cgroup.GroupOfPath(path))
}

// laneOfMembership returns the lane a membership puts a process in ("" for
// none), from the hierarchy that carries the lanes (v1 cpu where there is
// one, else v2).
func laneOfMembership(m cgroup.Membership) string {
	if p, ok := m.V1[cgroup.CPU]; ok {
		return laneOfGroup(p)
	}
	return laneOfGroup(m.V2)
}

// Cleanup removes everything a previous lanesd left in the kernel (after a
// crash, or a state dir that was lost): recorded processes go back where
// they were found, lanes' cgroups are removed. It refuses while a daemon
// answers on the socket.
func Cleanup(opts Options) error {
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	cfg, _, err := paths.LoadConfig(opts.ConfigPath)
	if err != nil {
		cfg = lane.Default()
	}
	socket, stateDir := opts.paths(cfg)
	if c, err := net.DialTimeout("unix", socket, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("lanesd is running on %s: stop it first (it restores the host itself)", socket)
	}
	store, eng, _, err := openHost(stateDir, logf)
	if err != nil {
		return err
	}
	defer store.Close()
	return eng.RestoreAll()
}

// openHost opens the state store and the engine on it, as lanesd's start
// and `lanesd --cleanup` both do, and deals with what an earlier lanesd
// left: its records checked and recovered (the health entries returned
// say what was found), then the network it shaped given back from its
// records (trees, IFBs, segment sizes, replaced roots) before anything is
// applied again.
func openHost(stateDir string, logf func(string, ...any)) (*state.Store, *enforce.Engine, map[string]string, error) {
	store, rep, err := openState(stateDir, logf)
	if err != nil {
		return nil, nil, nil, err
	}
	eng, err := enforce.New(enforce.Options{Store: store, Logf: logf})
	if err != nil {
		store.Close()
		return nil, nil, nil, err
	}
	recovered := recoverState(eng, store, rep, stateDir, logf)
	// Boosts an earlier lanesd left (it crashed): each thread's own nice
	// back; boosting starts over.
	if n, err := eng.RestoreBoosts(); err != nil {
		logf("give back boosts an earlier lanesd left: %v", err)
	} else if n > 0 {
		logf("gave %d processes boosted by an earlier lanesd their own nice values back", n)
	}
	// Reservations likewise: each thread's own policy back; the
	// reservation controllers start over under the guarantee.
	if n, err := eng.RestoreReserves(); err != nil {
		logf("give back reservations an earlier lanesd left: %v", err)
	} else if n > 0 {
		logf("gave %d processes an earlier lanesd reserved CPU for their own scheduling back", n)
	}
	cleanNetRecords(logf, store)
	return store, eng, recovered, nil
}
