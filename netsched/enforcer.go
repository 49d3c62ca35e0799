package netsched

import (
	"errors"
	"fmt"

	"github.com/lanes-qos/lanes/lane"
	"github.com/lanes-qos/lanes/state"
)

// Direction of a lane's counters.
const (
	Egress  = "egress"  // upload: the interface's own tree
	Ingress = "ingress" // download: the tree on the interface's IFB
)

// LaneStats are one lane's counters on one interface and direction.
type LaneStats struct {
	Lane      string `json:"lane"`
	Iface     string `json:"iface"`
	Direction string `json:"direction"` // Egress or Ingress
	ClassID   uint32 `json:"classid"`
	Bytes     uint64 `json:"bytes"`
	Packets   uint64 `json:"packets"`
	Drops     uint64 `json:"drops"`   // the class's, or its leaf qdisc's (CoDel, FIFO) when more
	Backlog   uint64 `json:"backlog"` // bytes queued now
	Qlen      uint64 `json:"qlen"`    // packets queued now
	// RateBits is the rate (bits/s) since an earlier Stats call for the
	// same interface (see Enforcer.Stats); 0 on the first call.
	RateBits uint64 `json:"rate_bits"`
}

// Option configures an Enforcer.
type Option func(*options)

type options struct {
	store          *state.Store // records of shaped interfaces (WithStore); nil: none
	netnsPath      string
	classifier     Classifier
	noIdleAutoHold bool
	idleReaderPrio int
}

// WithNetns makes the Enforcer manage the interfaces of the network
// namespace at path (e.g. /run/netns/NAME) instead of the caller's.
func WithNetns(path string) Option { return func(o *options) { o.netnsPath = path } }

// WithoutIdleAutoHold makes the idletime event reader (IdleEvents) only
// report foreground packets. By default it holds the gate itself before it
// reports the event, which saves the hand-over to the controller's
// goroutine on the way to the hold; the controller's own Hold then returns
// at once.
func WithoutIdleAutoHold() Option { return func(o *options) { o.noIdleAutoHold = true } }

// WithIdleReaderPriority runs the idletime event reader's thread at
// SCHED_FIFO priority prio (1..99; 0, the default: no change), so that a
// busy host's other work does not delay holds. It is best effort: a
// refusal (no CAP_SYS_NICE, an RT-less cgroup) is logged and the thread
// keeps its policy.
func WithIdleReaderPriority(prio int) Option { return func(o *options) { o.idleReaderPrio = prio } }

// ifbPrefix starts the name of every IFB device lanes creates; Cleanup
// removes devices with this prefix.
const ifbPrefix = "lanes-ifb"

// filterPrio is the tc filter priority of lanes' classifiers, and
// filterPrefix starts their names. redirPrio is the priority of the u32
// filter that sends ingress traffic to the IFB, right after the classifier.
const (
	filterPrio   = 0x4c4e
	redirPrio    = filterPrio + 1
	filterPrefix = "lanes_"
)

// PinDir is lanes' directory on bpffs. Lanes pins nothing today (its
// programs live as long as the daemon, or the tc filters that hold them);
// Cleanup still removes the directory so that a later version's pins
// never outlive a crash.
const PinDir = "/sys/fs/bpf/lanes"

// ErrIdleReaderRunning is returned by IdleEvents while an earlier reader
// has not ended yet (it ends shortly after its context is cancelled).
var ErrIdleReaderRunning = errors.New("a reader is already running")

// Caps are the enforcer's probed capabilities, the input of BuildPlan
// beside the config.
func (e *Enforcer) Caps() Caps { return Caps{Leaf: e.Leaf(), Idletime: e.IdletimeErr()} }

// Interfaces returns the interfaces cfg shapes: its net.interfaces, or
// the interface of the default route.
func Interfaces(cfg *lane.Config) ([]string, error) {
	if len(cfg.Net.Interfaces) > 0 {
		return cfg.Net.Interfaces, nil
	}
	dev, err := DefaultRouteInterface()
	if err != nil {
		return nil, fmt.Errorf("net: no interfaces configured and no default route: %w", err)
	}
	return []string{dev}, nil
}
