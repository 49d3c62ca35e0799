package api

import (
	"fmt"
	"time"
)

// Version of this build's API. The daemon sends it in VersionHeader; the
// client warns when the two differ.
const Version = "0.1.0"

// VersionHeader carries the daemon's version on every response.
const VersionHeader = "Lanes-Version"

// DefaultSocket is where lanesd listens unless configured otherwise.
const DefaultSocket = "/run/lanes/lanes.sock"

// Routes, all under /v1/. Keep sorted.
const (
	RouteDoctor = "/v1/doctor" // GET: mechanisms and backends
	RouteLanes  = "/v1/lanes"  // GET: lanes, settings, members, usage
	RouteMove   = "/v1/move"   // POST MoveRequest: put processes into a lane
	RouteProcs  = "/v1/procs"  // GET: processes in lanes
	RouteReload = "/v1/reload" // POST: reread the config file
	RouteStatus = "/v1/status" // GET: daemon status and health
)

// Error codes: stable strings clients may test.
const (
	CodeBadRequest  = "bad-request"    // malformed body or parameters
	CodeUnknownLane = "unknown-lane"   // the lane does not exist
	CodeNoProcess   = "no-process"     // a PID does not exist (or exited during the request)
	CodeForbidden   = "forbidden"      // the caller may not do this
	CodeConfig      = "config-invalid" // a reload found an invalid config; the running one is kept
	CodeInternal    = "internal"       // the daemon failed applying the change (nothing was kept)
	CodeNotFound    = "not-found"      // no such route
	CodeMethod      = "method"         // wrong HTTP method
)

// Error is the body of every non-2xx response.
type Error struct {
	Message string `json:"error"`
	Code    string `json:"code"`
	// Param names the query parameter at fault; for an expression
	// (events' filter) Expr is it and Line, Column (1-based) where.
	Param  string `json:"param,omitempty"`
	Expr   string `json:"expr,omitempty"`
	Line   int    `json:"line,omitempty"`
	Column int    `json:"column,omitempty"`
}

func (e *Error) Error() string { return e.Message }

// Errorf builds an *Error with a code.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// MoveRequest asks to put processes (and their descendants) into a lane.
type MoveRequest struct {
	PIDs []int  `json:"pids"`
	Lane string `json:"lane"`
}

// MoveResponse lists what was moved: each requested PID with its
// descendants that moved along.
type MoveResponse struct {
	Lane  string `json:"lane"`
	Moved []int  `json:"moved"`
	// Units are the systemd scopes moved whole, where systemd owns the
	// cgroup tree: a requested process's scope goes with all its
	// processes (not a login session's, nor the caller's own).
	Units []MovedUnit `json:"units,omitempty"`
}

// MovedUnit is a systemd scope a move took whole.
type MovedUnit struct {
	Unit  string `json:"unit"`
	PID   int    `json:"pid"`   // the requested process in it
	Procs int    `json:"procs"` // the processes it held
}

// CPUSettings of a lane on the wire.
type CPUSettings struct {
	Weight     int     `json:"weight"`
	Idle       bool    `json:"idle"`
	CapPercent float64 `json:"cap_percent,omitempty"`
}

// DiskSettings of a lane on the wire.
type DiskSettings struct {
	Class  string `json:"class,omitempty"`
	Level  int    `json:"level"`
	Weight int    `json:"weight,omitempty"`
}

// NetSettings of a lane on the wire (rates in bit/s).
type NetSettings struct {
	Priority int    `json:"priority"`
	Rate     uint64 `json:"rate,omitempty"`
	Ceil     uint64 `json:"ceil,omitempty"`
	Borrow   bool   `json:"borrow"`
}

// NetCounters are a lane's traffic-class counters on one interface and direction.
type NetCounters struct {
	Iface     string  `json:"iface"`
	Direction string  `json:"direction"` // "egress" or "ingress"
	Bytes     uint64  `json:"bytes"`
	Packets   uint64  `json:"packets"`
	Drops     uint64  `json:"drops"`
	Backlog   uint64  `json:"backlog_bytes"`
	RateBps   float64 `json:"rate_bps"`
}

// Lane describes one lane, its settings and its current members.
type Lane struct {
	Name         string        `json:"name"`
	Default      bool          `json:"default,omitempty"`
	Unprivileged bool          `json:"unprivileged"`
	CPU          CPUSettings   `json:"cpu"`
	Disk         DiskSettings  `json:"disk"`
	Net          NetSettings   `json:"net"`
	Cgroup       string        `json:"cgroup"`
	Members      []int         `json:"members"`
	CPUTime      time.Duration `json:"cpu_time_ns"`
	NetCounters  []NetCounters `json:"net_counters,omitempty"`
}

// LanesResponse is the body of GET /v1/lanes.
type LanesResponse struct {
	Lanes []Lane `json:"lanes"`
}

// Proc is one process in a lane.
type Proc struct {
	PID     int    `json:"pid"`
	Lane    string `json:"lane"`
	Comm    string `json:"comm"`
	UID     int    `json:"uid"`
	Threads int    `json:"threads"`
	IOClass string `json:"io_class"`
	// Why: "move" (lanes move/run), "rule:<line>" (a config rule), or
	// "inherited" (forked from a member).
	Why string `json:"why"`
}

// ProcsResponse is the body of GET /v1/procs.
type ProcsResponse struct {
	Procs []Proc `json:"procs"`
}

// Health is one problem the daemon has met and carries on with.
type Health struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Status is the body of GET /v1/status.
type Status struct {
	Version    string    `json:"version"`
	PID        int       `json:"pid"`
	Started    time.Time `json:"started"`
	Config     string    `json:"config"`
	ConfigLoad time.Time `json:"config_loaded"`
	// ConfigError is set when the last reload failed (the running config was kept).
	ConfigError string `json:"config_error,omitempty"`
	// ConfigWarnings are the running config's warnings ("file:line: key:
	// why"): settings that load but do not do what they read as.
	ConfigWarnings []string    `json:"config_warnings,omitempty"`
	StateDB        string      `json:"state_db"`
	Events         string      `json:"events"` // "proc connector" or "polling"
	Mechanisms     []Mechanism `json:"mechanisms"`
	Lanes          []Lane      `json:"lanes"`
	// Idletime has one entry per resource under idletime scheduling (an
	// interface direction, a block device).
	Idletime []IdleGate `json:"idletime,omitempty"`
	// Links are the interfaces lanes shapes, with their offloads.
	Links  []NetLink `json:"links,omitempty"`
	Health []Health  `json:"health,omitempty"`
	// Bus is the daemon's event channels: what was published and each
	// subscription's queue and counters (a stuck subscriber shows as drops).
	Bus *EventBus `json:"event_bus,omitempty"`
	// Bridge is the NATS bridge's state (nil: no [bridge] url).
	Bridge *Bridge `json:"bridge,omitempty"`
	// Controllers are the running [[controller]]s: what each watches,
	// where its knobs stand and what it did last.
	Controllers []Controller `json:"controllers,omitempty"`
	// History is the event history in the state database (nil: off).
	History *History `json:"history,omitempty"`
	// Boost is the lanes with a boost policy: whether a contact is on
	// and which processes hold a boost.
	Boost []BoostLane `json:"boost,omitempty"`
	// Reserve is the lanes with a CPU reservation: how it is enforced
	// and whether the lane runs beyond it now.
	Reserve []ReserveLane `json:"reserve,omitempty"`
	// ReserveAssist is the tick assist of those under CFS bandwidth (nil:
	// no reservations).
	ReserveAssist *ReserveAssist `json:"reserve_assist,omitempty"`
	// Speed is the lanes whose send rate is held by their CPU share.
	Speed []SpeedLane `json:"speed,omitempty"`
	// Reports are the last report of each live process that sent one
	// (POST /v1/report), oldest first; the caller sees its own only
	// unless it is root. `lanes proxy client` reports its networks here.
	Reports []AppReport `json:"reports,omitempty"`
}

// AppReport is a process's last QoS report.
type AppReport struct {
	PID     int                `json:"pid"`
	UID     int                `json:"uid"`
	Lane    string             `json:"lane,omitempty"`
	Time    time.Time          `json:"time"`
	Metrics map[string]float64 `json:"metrics"`
}

// Controller is one running controller's state.
type Controller struct {
	Name   string `json:"name"`
	Lane   string `json:"lane"`
	Law    string `json:"law"`
	Metric string `json:"metric"` // topic and payload field
	Target string `json:"target"`
	// Knobs are its actuators with the value each has now, as the
	// controller last set or read it.
	Knobs []ControllerKnob `json:"knobs"`
	// Samples is how many metric samples it took; LastValue and
	// LastSample the latest (zero before the first).
	Samples    uint64    `json:"samples"`
	LastValue  float64   `json:"last_value"`
	LastSample time.Time `json:"last_sample,omitzero"`
	// Actions is how many knob changes it published, LastAction when the
	// latest was; Errors the samples and actions that failed.
	Actions    uint64    `json:"actions"`
	LastAction time.Time `json:"last_action,omitzero"`
	Errors     uint64    `json:"errors"`
}

// ControllerKnob is one actuator of a controller and its current value.
type ControllerKnob struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Min   float64 `json:"min"`
	Max   float64 `json:"max"`
}

// History is the event history's size and limits ([events]).
type History struct {
	Events    int       `json:"events"`
	Oldest    time.Time `json:"oldest,omitzero"`
	Keep      int       `json:"keep"`      // at most this many events
	Retention string    `json:"retention"` // none older than this
	Topics    []string  `json:"topics"`
	Error     string    `json:"error,omitempty"`
}

// EventBus is the event channels' counters.
type EventBus struct {
	Published     uint64              `json:"published"`
	InvalidTopics uint64              `json:"invalid_topics"`
	Subscriptions []EventSubscription `json:"subscriptions"`
}

// EventSubscription is one subscriber's queue on the bus: Queued of Queue
// events wait; Dropped did not fit (its drop policy says which went),
// Expired passed their deadline queued, Filtered were refused by a filter
// and FilterErrors failed to evaluate.
type EventSubscription struct {
	Name         string   `json:"name"`
	Topics       []string `json:"topics"`
	Queue        int      `json:"queue"`
	Policy       string   `json:"policy"`
	Queued       int      `json:"queued"`
	Delivered    uint64   `json:"delivered"`
	Dropped      uint64   `json:"dropped"`
	Expired      uint64   `json:"expired"`
	Filtered     uint64   `json:"filtered"`
	FilterErrors uint64   `json:"filter_errors"`
}

// Bridge is the state of the event bridge to other hosts over NATS. Every
// exported event is sent, buffered, lost or expired.
type Bridge struct {
	URL        string `json:"url"`
	Host       string `json:"host"`
	Connected  bool   `json:"connected"`
	Server     string `json:"server,omitempty"`
	Reconnects uint64 `json:"reconnects"`
	// Exported events: handed to the server, waiting for it, lost (did not
	// fit the buffer, or could not be sent), past their deadline.
	Sent         uint64 `json:"sent"`
	Buffered     uint64 `json:"buffered"`
	Lost         uint64 `json:"lost"`
	Expired      uint64 `json:"expired"`
	FilterErrors uint64 `json:"filter_errors"`
	// Imported events: published on the bus, refused as invalid, refused
	// by the in filter, dropped by a full client queue.
	Received  uint64 `json:"received"`
	Refused   uint64 `json:"refused"`
	Filtered  uint64 `json:"filtered"`
	Dropped   uint64 `json:"dropped"`
	LastError string `json:"last_error,omitempty"`
}

// NetLink is one shaped interface's segmentation offloads, segment sizes
// and default TCP congestion control, with a warning for each setting
// known to hurt under lanes.
type NetLink struct {
	Iface string `json:"iface"`
	TSO   bool   `json:"tso"`
	GSO   bool   `json:"gso"`
	GRO   bool   `json:"gro"`
	LRO   bool   `json:"lro,omitempty"`
	// GSOMaxSize and GROMaxSize are the largest packets the stack hands
	// the shaper now; OrigGSOMaxSize and OrigGROMaxSize what they were
	// before lanes bounded them (0: not bounded).
	GSOMaxSize        uint32 `json:"gso_max_size"`
	GROMaxSize        uint32 `json:"gro_max_size"`
	OrigGSOMaxSize    uint32 `json:"orig_gso_max_size,omitempty"`
	OrigGROMaxSize    uint32 `json:"orig_gro_max_size,omitempty"`
	CongestionControl string `json:"congestion_control"`
	// ReceiveWindow is the gain bounding each shaped download's receive
	// window (x lane ceiling x RTT; net.receive_window), 0: not bounded.
	ReceiveWindow float64  `json:"receive_window,omitempty"`
	Warnings      []string `json:"warnings,omitempty"`
	Error         string   `json:"error,omitempty"`
}

// IdleGate is the state of idletime scheduling on one resource: the
// preemption-interval state machine's current state and counters. It is
// the wire form of idletime.GateStats, converted in one place (the
// daemon's idletime status), and keeps its own type on purpose: the
// API's JSON is a contract the controller's internals must not change
// (time per state as a map of state names, the gate's PI mode), and the
// API types import nothing of the engine.
type IdleGate struct {
	Name string `json:"name"` // "eth0/egress", "eth0/ingress", "disk 7:0"
	// Mode is how the PI is chosen: "fixed", "auto", "adaptive".
	Mode  string        `json:"mode"`
	State string        `json:"state"` // idle, foreground, background, in_pi
	Held  bool          `json:"held"`  // background is held now
	PI    time.Duration `json:"pi_ns"` // the current preemption interval (the mode's, or a network gate's spacing where that is longer)
	// Time spent in each state since the controller started (held time is
	// counted as in_pi).
	Time map[string]time.Duration `json:"time_ns"`
	// Preemptions: foreground arrived while background was being served
	// (the paper's B[f]); ForegroundIdle: at an idle resource (I[f]);
	// ForegroundInPI: within a running interval (P[f]); Expiries: intervals
	// that ran out (t), each reopening the resource to background.
	Preemptions    uint64 `json:"preemptions"`
	ForegroundIdle uint64 `json:"foreground_idle"`
	ForegroundInPI uint64 `json:"foreground_in_pi"`
	Expiries       uint64 `json:"expiries"`
	Holds          uint64 `json:"holds"`
	Releases       uint64 `json:"releases"`
	Errors         uint64 `json:"errors"`
	// Reaction is the time from the kernel seeing a foreground packet or
	// request to the background being held, over recent holds.
	Reaction Percentiles `json:"reaction"`
	// Counters is the paper's X[state][event] table, keyed like "B[f]".
	Counters map[string]uint64 `json:"counters,omitempty"`
}

// Percentiles summarise a set of durations.
type Percentiles struct {
	N   int           `json:"n"`
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`
}

// Mechanism is one line of `lanes doctor`: a resource, the backend lanes
// uses for it on this host, and why.
type Mechanism struct {
	Resource  string `json:"resource"`
	Backend   string `json:"backend"`
	Preferred bool   `json:"preferred"`
	Reason    string `json:"reason"`
	OK        bool   `json:"ok"`
}

// DoctorResponse is the body of GET /v1/doctor.
type DoctorResponse struct {
	Kernel     string      `json:"kernel"`
	Mechanisms []Mechanism `json:"mechanisms"`
}

// ReloadResponse is the body of POST /v1/reload.
type ReloadResponse struct {
	Config string   `json:"config"`
	Lanes  []string `json:"lanes"`
	// Warnings are the new config's (see Status.ConfigWarnings).
	Warnings []string `json:"warnings,omitempty"`
}
