// Package netsched enforces lanes on the network: per managed interface an
// HTB tree with one class per lane (leaf fq_codel, or where the kernel
// lacks it a head-drop packet FIFO on upload and a byte FIFO on download,
// sized to a target delay), BPF classification of every socket by its
// lane, and an IFB with the same tree for the download direction. Only
// the daemon uses it (enforce reaches it through its Net interface, which
// the daemon sets; daemon-less `lanes run` shapes no network). The CLI and
// the API types must not import it: `lanes doctor` asks lanesd, or probes
// with internal/netprobe.
//
// BuildPlan turns a configuration (its [net] section and its lanes) and
// the kernel's Caps into the whole Plan of an interface, idletime
// included: it is the one place where those settings become a tree (pure,
// golden-tested). Interfaces and ClassifierOf read which interfaces and
// which classifier a configuration asks for. An
// Enforcer applies plans: Apply (idempotent; on error nothing of lanes is
// left and the original root qdisc is back), then BindLane for each lane's
// cgroup v2 directory, MoveSockets after a process moved lanes, Stats for
// counters, Remove to restore an interface, Close at exit. Cleanup removes
// a crashed run's leftovers; a new Enforcer's Apply adopts them instead.
//
// Records: given a state store (WithStore), the Enforcer records each
// interface it shapes (state.KindQdisc: the rate, the original root tree
// and segment sizes) before it changes it, and deletes the record once the
// interface is given back; CleanupRecorded, at the start after a crash,
// runs Cleanup and gives each recorded interface its tree and sizes back.
//
// Every tree has the root handle Major ("4c4e:"); a lane's class id
// (Major:minor) is also the socket priority that puts a socket in that
// lane. Which lane a packet is in, first match wins:
//
//  1. the socket's priority, when it is a lanes class id: set by lanes at
//     socket creation in a lane's cgroup (cgroup/sock_create program), by
//     the program itself (SO_PRIORITY: an explicit label), or by
//     MoveSockets (which relabels only sockets carrying lanes' own label);
//  2. the lane of the cgroup the socket was created in (egress: the tc
//     classifier looks up the socket's cgroup ancestors; ingress: the label
//     lanes stored in the socket at creation);
//  3. the default lane's class (HTB's default).
//
// Downloads: a clsact ingress program finds each packet's local socket
// (bpf_sk_lookup_tcp/udp) and labels the packet; a u32 filter with mirred
// redirects IP packets to the IFB "lanes-ifb<ifindex>".
//
// Port rules, the last fallback: where the kernel cannot run lanes' BPF
// programs (or WithClassifier(ClassifyU32) says so), the lanes' net.ports
// become u32 filters on the HTB root of the interface and of its IFB
// (u32_linux.go): TCP and UDP packets whose local, else remote, port is in
// a lane's rules go to that lane, the rest to the default lane. With BPF
// they are not installed. The same applies to downloads alone when only
// the BPF ingress helpers are missing.
//
// Idletime (seed 003's preemption intervals; idle_linux.go has the
// mechanism): BuildPlan makes the lanes with net.idletime idletime
// background (their leaves become TBFs that can be held, unless pi is
// "off"), marks their uploads DSCP LE and makes receiving sockets follow
// LE/CS1 senders into them, all as [net.idletime] says. After Apply,
// the daemon gets the gates (IdleGates per interface, or AllIdleGates),
// starts IdleEvents once with the same gates, and hands both to the
// idletime Controller, which calls Release after each preemption interval
// and Hold on each event (the event reader has held the gate by then);
// ForegroundRTT feeds the "auto" PI length. After an Apply that adds or
// removes interfaces or idletime lanes, it fetches the gates again and
// restarts IdleEvents.
package netsched
