//go:build ignore

// Packet classification for lanes' network enforcement (package netsched).
//
// A lane is an HTB leaf class LANES_MAJOR:minor. The kernel's HTB puts a
// packet straight into the leaf class whose id equals skb->priority, so the
// programs here only ever decide one number: the packet's priority.
//
// Precedence, first match wins:
//  1. The socket's priority is a lanes class (major LANES_MAJOR): keep it.
//     That priority was set by lanes_sock_create when the socket was
//     created in a lane's cgroup, by the program itself through SO_PRIORITY
//     (an explicit label), or by `lanes move` (netsched.MoveSockets, which
//     relabels sockets whose label was lanes' own).
//  2. Otherwise the lane of the socket's cgroup (the cgroup the socket was
//     created in; the shallowest ancestor found in lane_of_cgroup): set it.
//  3. Otherwise leave the packet alone: HTB's default class (normal) takes it.
//
// Download direction (lanes_ingress): the packet's local socket is found
// with bpf_sk_lookup_tcp/udp; its priority decides as in 1., and otherwise
// the class lanes_sock_create stored in the socket's storage (tc programs
// cannot read a socket's cgroup: bpf_sk_cgroup_id is cgroup-skb only).
// Every IP packet then goes to the device's IFB (u32 + mirred), whose HTB
// tree has the same classes; other packets (ARP) pass unshaped.
//
// Idletime (seed 003, preemption intervals), after the class is decided:
//  - Gates: a shaped device direction whose {ifindex, direction} is in
//    idle_slot has a struct idle_gate in the mmapable array idle_gates. A
//    packet of a class lane_flags marks LANE_F_IDLE is background: it
//    stamps last_bg_ns. A packet of a class marked LANE_F_QUIET (a lane
//    with net.preempts = false) is ignored. Any other IP packet is
//    foreground: it stamps last_fg_ns (and last_full_ns if it is at least
//    IDLE_FULL_LEN bytes long) and, when user space left the gate
//    open (it released the background TBF), closes it with a
//    compare-and-swap and reports one struct idle_event in the ring buffer
//    idle_events, so user space holds the background again. Foreground TCP
//    packets with a full socket feed the gate's minimum- and smoothed-RTT
//    averages (the "auto" PI length). The direction is keyed by the device
//    the packet was seen on (egress: the device; ingress: the real device,
//    whose IFB holds the tree).
//  - Marking: egress packets of a class with LANE_F_MARK_LE get DSCP LE
//    (RFC 8622, DSCP 1) in the IPv4 TOS (checksum fixed) or IPv6 traffic
//    class.
//  - Receive windows (downloads): on a device with entries in rx_window
//    (its downloads are shaped on its IFB, after the bottleneck), the
//    window a local TCP socket advertises in its outgoing packets (ACKs)
//    is lowered to at most gain x the class's ceiling x the socket's
//    minimum RTT + 4 segments, rewritten in the header (checksum fixed).
//    A sender then has no more than about gain x the bandwidth-delay
//    product in flight, so its slow start or bandwidth probes cannot
//    build a queue before lanes' IFB, at the bottleneck, where lanes
//    cannot reorder it. Rewriting needs the socket's window scale, which
//    only the SYNs carry: our SYN's (rx_sock, confirmed by the peer's
//    SYN-ACK at ingress) or our SYN-ACK's (rx_synack by connection, as
//    a passive open's SYN-ACK leaves from a request socket). Connections
//    opened before lanes are left alone. (Setting TCP_WINDOW_CLAMP from a
//    sock_ops program does not hold: since Linux 6.x the stack resets the
//    clamp from the receive buffer whenever the segments' truesize ratio
//    changes, and a sock_ops program sees only slow-path packets.)
//  - Congestion control: lanes_sockops, attached to lane cgroups, gives a
//    new TCP connection (connect, or accepted) of a class lane_flags marks
//    LANE_F_LEDBAT the congestion control lanes_ledbat (bpf/ledbat.c),
//    unless its program chose one other than the host's default (the
//    name in cc_default): a program's own choice wins.
//  - Marking per socket: lanes_sockops also gives such a connection of a
//    class marked LANE_F_MARK_LE DSCP LE as its own IP_TOS/IPV6_TCLASS
//    (a program's own DSCP wins), so its packets leave marked where no
//    lanes_egress runs (no interface shaped); sockmark.c does the same
//    for UDP sockets when they connect or send.
//  - Following: on a device in follow_of_dev, an incoming packet with DSCP
//    LE or CS1 (QBone scavenger) whose local socket has no lanes label
//    labels that socket (socket storage followed) with the device's follow
//    class; the socket's downloads, and its egress packets (ACKs, replies)
//    through the egress classifier's last fallback, are then background.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/in.h>
#include <linux/pkt_cls.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define LANES_MAJOR 0x4c4e
// lane_flags bits.
#define LANE_F_IDLE 1    // an idletime background class
#define LANE_F_MARK_LE 2 // egress packets get DSCP LE
#define LANE_F_QUIET 4   // packets neither foreground nor background to the gates
#define LANE_F_LEDBAT 8  // TCP sockets get lanes_ledbat (lanes_sockops)
#define LANE_F_RLEDBAT 16 // TCP sockets bound their receive window (rledbat.c)
// Gate directions (struct idle_key.dir).
#define DIR_EGRESS 0
#define DIR_INGRESS 1
#define MAX_GATES 64
#define DSCP_LE 0x01
#define DSCP_CS1 0x08
// Lane cgroups live at this depth or above (lanes creates them at depth 1).
#define MAX_LEVEL 4

char __license[] SEC("license") = "GPL";

// lane_of_cgroup maps a cgroup v2 id (the inode number of its directory) to
// the lane's class id (LANES_MAJOR << 16 | minor).
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, __u32);
} lane_of_cgroup SEC(".maps");

// auto_label remembers, per socket, the class lanes itself gave it, so that
// user space can tell lanes' label from a program's explicit label.
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u32);
} auto_label SEC(".maps");

// lane_flags maps a class id to LANE_F_* bits.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u32);
} lane_flags SEC(".maps");

struct idle_key {
	__u32 ifindex;
	__u32 dir; // DIR_EGRESS or DIR_INGRESS
};

// idle_gate is one gate's state, shared with user space through mmap:
// the program writes the stamps, counters and rtt; user space sets open
// (release) and clears it (hold), the program clears it on foreground.
struct idle_gate {
	__u64 last_fg_ns; // bpf_ktime_get_ns of the last foreground packet
	__u64 last_bg_ns; // ... of the last background packet
	__u64 fg_pkts;
	__u64 bg_pkts;
	__u64 events; // events reported (opens closed by a foreground packet)
	__u32 open;   // 1: background released, report the next foreground packet
	__u32 rtt_us;  // EWMA (gain 1/8) of foreground TCP sockets' minimum RTT, µs
	__u32 srtt_us; // ... of their smoothed RTT, µs
	__u32 pad;
	__u64 last_full_ns; // ... of the last foreground packet of at least IDLE_FULL_LEN bytes
};

// IDLE_FULL_LEN: a foreground packet this long is a busy sender's (a TCP
// segment, a GSO packet), not a probe's or a ping's: user space lengthens
// the PI to span the gap to a busy sender's next one while these come
// (netsched's gate spacing).
#define IDLE_FULL_LEN 1000

// idle_event reports foreground on an open gate.
struct idle_event {
	__u64 ts; // the packet's bpf_ktime_get_ns
	__u32 ifindex;
	__u32 dir;
	__u32 slot;
	__u32 pad;
};

// idle_slot maps a gate's device direction to its slot in idle_gates.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_GATES);
	__type(key, struct idle_key);
	__type(value, __u32);
} idle_slot SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, MAX_GATES);
	__type(key, __u32);
	__type(value, struct idle_gate);
} idle_gates SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} idle_events SEC(".maps");

// follow_of_dev maps the ifindex of a device whose downloads lanes shapes
// to the class that sockets receiving LE/CS1 packets follow into.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} follow_of_dev SEC(".maps");

// probe_class maps the ICMP identifier (network order) of lanesd's own
// probes (the auto rate's pinger, package netsched) to the class their
// echo and timestamp replies take on ingress: a reply has no socket to
// find, and in the download tree's default class it would queue behind
// lanes' own bulk downloads, so the probe would measure lanes' queue
// instead of the link's.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u16);
	__type(value, __u32);
} probe_class SEC(".maps");

// followed holds the class lanes_ingress gave a socket that received
// LE/CS1 packets.
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u32);
} followed SEC(".maps");

// rx_key is a shaped device and a class on it (0: unclassified, the
// device's default class).
struct rx_key {
	__u32 ifindex;
	__u32 cls;
};

// rx_limit is what a class may receive on a device.
struct rx_limit {
	__u64 ceil_bps; // the class's ceiling, bytes/s
	__u32 gain;     // window = gain/1024 x ceil x RTT (+ 4 segments)
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct rx_key);
	__type(value, struct rx_limit);
} rx_window SEC(".maps");

// rx_sock is a socket's receive window scale, as far as lanes knows it.
struct rx_sock {
	__u8 wscale; // shift of the socket's advertised windows
	__u8 known;  // 1: agreed by both ends (0: our SYN's offer, unanswered)
	__u16 pad;
	__u32 window; // the last bound applied, bytes
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct rx_sock);
} rx_sock SEC(".maps");

// rx_conn names a connection by its local and remote ends.
struct rx_conn {
	__u32 laddr[4];
	__u32 raddr[4];
	__u16 lport;
	__u16 rport;
	__u32 family;
};

// rx_synack holds the window scale of SYN-ACKs lanes saw leave, until
// the connection's first packet from its full socket takes it.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct rx_conn);
	__type(value, __u8);
} rx_synack SEC(".maps");

// rx_stats counts (RX_* indexes).
#define RX_SOCKETS 0 // sockets whose window scale is known: bounded
#define RX_LOWERED 1 // packets whose advertised window was lowered
#define RX_NSTATS 2
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, RX_NSTATS);
	__type(key, __u32);
	__type(value, __u64);
} rx_stats SEC(".maps");

static __always_inline void rx_count(__u32 i)
{
	__u64 *n = bpf_map_lookup_elem(&rx_stats, &i);
	if (n)
		__sync_fetch_and_add(n, 1);
}

// rx_limit_of returns the receive limit of class cls on device ifindex:
// the class's own, else the device's default class's, else none.
static __always_inline struct rx_limit *rx_limit_of(__u32 ifindex, __u32 cls)
{
	struct rx_key key = {.ifindex = ifindex, .cls = cls};
	struct rx_limit *l = bpf_map_lookup_elem(&rx_window, &key);
	if (l || !cls)
		return l;
	key.cls = 0;
	return bpf_map_lookup_elem(&rx_window, &key);
}

#define TCPOPT_EOL 0
#define TCPOPT_NOP 1
#define TCPOPT_WINDOW 3
#define TCP_MAX_WSCALE 14

// tcp_wscale returns the window scale option of the TCP header at l4off
// in skb, or -1 if it has none. It is a global function: the verifier
// checks it once, on its own, rather than once for every path that
// reaches it (the option walk's branches multiplied by the callers' made
// the classifiers cost 200,000 verified instructions each, a fifth of a
// second at every lanesd start).
__noinline int tcp_wscale(struct __sk_buff *skb, __u32 l4off)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	if (l4off > 120)
		return -1;
	struct tcphdr *th = data + l4off;
	if ((void *)(th + 1) > data_end)
		return -1;
	__u8 *opts = (__u8 *)(th + 1);
	__u32 optlen = th->doff * 4;
	if (optlen <= sizeof(*th))
		return -1;
	optlen -= sizeof(*th);
	__u32 off = 0;
	int i;
	for (i = 0; i < 40; i++) {
		// The verifier forgets how off was reached (all it keeps is
		// 0..63): the states of the paths through the options then
		// coincide at each step and it checks one of them, not one per
		// combination of option lengths seen before. The compiler must
		// not drop the mask, hence asm.
		asm volatile("%[off] &= 63" : [off] "+r"(off));
		if (off >= optlen || off >= 40)
			return -1;
		__u8 *o = opts + off;
		if ((void *)(o + 1) > data_end)
			return -1;
		__u8 kind = o[0];
		if (kind == TCPOPT_EOL)
			return -1;
		if (kind == TCPOPT_NOP) {
			off++;
			continue;
		}
		if ((void *)(o + 2) > data_end)
			return -1;
		__u8 len = o[1];
		if (len < 2)
			return -1;
		if (kind == TCPOPT_WINDOW) {
			if (len != 3 || (void *)(o + 3) > data_end)
				return -1;
			return o[2] > TCP_MAX_WSCALE ? TCP_MAX_WSCALE : o[2];
		}
		off += len;
	}
	return -1;
}

static __always_inline int is_lanes_class(__u32 prio)
{
	return (prio >> 16) == LANES_MAJOR && (prio & 0xffff) != 0;
}

SEC("cgroup/sock_create")
int lanes_sock_create(struct bpf_sock *sk)
{
	__u32 *cls = 0;
	int level;

#pragma unroll
	for (level = 1; level <= MAX_LEVEL; level++) {
		__u64 id = bpf_get_current_ancestor_cgroup_id(level);
		if (id == 0)
			break;
		cls = bpf_map_lookup_elem(&lane_of_cgroup, &id);
		if (cls)
			break;
	}
	if (!cls)
		return 1;
	__u32 c = *cls;
	sk->priority = c;
	__u32 *label = bpf_sk_storage_get(&auto_label, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (label)
		*label = c;
	return 1;
}

static __always_inline __u32 lane_flags_of(__u32 cls)
{
	__u32 *f = bpf_map_lookup_elem(&lane_flags, &cls);
	return f ? *f : 0;
}

// cc_default holds the host's default congestion control's name (set by
// netsched; empty: any socket's may be replaced).
struct cc_name {
	char name[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cc_name);
} cc_default SEC(".maps");

#define SOL_TCP 6

#include "sockmark.h"

SEC("sockops")
int lanes_sockops(struct bpf_sock_ops *skops)
{
	static const char ledbat[] = "lanes_ledbat";
	if (skops->op != BPF_SOCK_OPS_TCP_CONNECT_CB && skops->op != BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB)
		return 1;
	struct bpf_sock *sk = skops->sk;
	if (!sk)
		return 1;
	// The socket's class: its priority, or where that is not a lanes
	// class (its program set a priority of its own, or an IP_TOS, which
	// sets the priority too) the class lanes gave it at creation, as the
	// egress classifier falls back to the socket's cgroup.
	__u32 prio = sk->priority, cls = prio;
	if (!is_lanes_class(cls)) {
		__u32 *label = bpf_sk_storage_get(&auto_label, sk, 0, 0);
		if (!label || !is_lanes_class(*label))
			return 1;
		cls = *label;
	}
	__u32 flags = lane_flags_of(cls);
	if (flags & LANE_F_MARK_LE)
		sock_mark_le(skops, skops->family, prio);
	if (!(flags & LANE_F_LEDBAT))
		return 1;
	__u32 zero = 0;
	struct cc_name *def = bpf_map_lookup_elem(&cc_default, &zero);
	if (def && def->name[0]) {
		struct cc_name cur = {};
		if (bpf_getsockopt(skops, SOL_TCP, TCP_CONGESTION, cur.name, sizeof(cur.name)))
			return 1;
		int i;
		for (i = 0; i < (int)sizeof(cur.name); i++) {
			if (cur.name[i] != def->name[i])
				return 1; // the program's own choice
			if (!cur.name[i])
				break;
		}
	}
	bpf_setsockopt(skops, SOL_TCP, TCP_CONGESTION, (void *)ledbat, sizeof(ledbat));
	return 1;
}

// rtts are a TCP full socket's minimum and smoothed RTT, µs (0: unknown).
struct rtts {
	__u32 min, srtt;
};

static __always_inline struct rtts rtts_of(struct bpf_sock *sk)
{
	struct rtts r = {};
	if (!sk || sk->protocol != IPPROTO_TCP)
		return r;
	struct bpf_tcp_sock *tp = bpf_tcp_sock(sk);
	if (!tp)
		return r;
	// rtt_min is ~0 until the first RTT sample (a SYN, the first data).
	if (tp->rtt_min != ~0U)
		r.min = tp->rtt_min;
	r.srtt = tp->srtt_us >> 3;
	return r;
}

// lane_rtt sums, per lane and CPU, the RTTs of the TCP sockets whose
// packets lanes_egress classified: index the class's minor (0: a packet
// in no lanes class, which HTB sends to the default lane). User space
// reads the sums' change over a period: the mean RTT of the lane's TCP
// packets then (each packet weighs its socket's current RTT).
struct lane_rtt {
	__u64 pkts;     // packets with an RTT sample
	__u64 srtt_sum; // sum of their sockets' smoothed RTT, µs
	__u64 min_pkts; // those of them whose socket knows its minimum RTT
	__u64 min_sum;  // sum of those sockets' minimum RTT, µs
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, struct lane_rtt);
} lane_rtts SEC(".maps");

static __always_inline void lane_rtt_account(__u32 cls, struct rtts rtt)
{
	if (!rtt.srtt)
		return;
	__u32 i = 0;
	if (is_lanes_class(cls))
		i = cls & 0xff;
	struct lane_rtt *r = bpf_map_lookup_elem(&lane_rtts, &i);
	if (!r)
		return;
	r->pkts++;
	r->srtt_sum += rtt.srtt;
	if (rtt.min) {
		r->min_pkts++;
		r->min_sum += rtt.min;
	}
}

static __always_inline void ewma(__u32 *avg, __u32 sample)
{
	if (!sample)
		return;
	__u32 old = *avg;
	*avg = old ? old - (old >> 3) + (sample >> 3) : sample;
}

// idle_account stamps the gate of (ifindex, dir), if it has one, with a
// packet whose class has lane_flags flags (0: unclassified, the default
// lane), and reports the foreground packet that closes an open gate. rtt
// are the RTTs of the packet's TCP socket (zeros if unknown).
static __always_inline void idle_account(__u32 ifindex, __u32 dir, __u32 flags, struct rtts rtt, __u32 len)
{
	struct idle_key key = {.ifindex = ifindex, .dir = dir};
	__u32 *slot = bpf_map_lookup_elem(&idle_slot, &key);
	if (!slot)
		return;
	__u32 idx = *slot;
	struct idle_gate *g = bpf_map_lookup_elem(&idle_gates, &idx);
	if (!g)
		return;
	if (flags & LANE_F_QUIET)
		return;
	__u64 now = bpf_ktime_get_ns();
	if (flags & LANE_F_IDLE) {
		g->last_bg_ns = now;
		__sync_fetch_and_add(&g->bg_pkts, 1);
		return;
	}
	g->last_fg_ns = now;
	if (len >= IDLE_FULL_LEN)
		g->last_full_ns = now;
	__sync_fetch_and_add(&g->fg_pkts, 1);
	ewma(&g->rtt_us, rtt.min);
	ewma(&g->srtt_us, rtt.srtt);
	if (g->open && __sync_val_compare_and_swap(&g->open, 1, 0) == 1) {
		__sync_fetch_and_add(&g->events, 1);
		struct idle_event ev = {.ts = now, .ifindex = ifindex, .dir = dir, .slot = idx};
		bpf_ringbuf_output(&idle_events, &ev, sizeof(ev), BPF_RB_FORCE_WAKEUP);
	}
}

// mark_le sets DSCP LE in the IP header after the Ethernet header,
// keeping the ECN bits.
static __always_inline void mark_le(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > data_end || eth->h_proto != skb->protocol)
		return;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > data_end)
			return;
		__u8 tos = (DSCP_LE << 2) | (ip->tos & 0x3);
		if (ip->tos == tos)
			return;
		__u16 oldw = *(__u16 *)ip;
		__u8 newb[2] = {((__u8 *)ip)[0], tos};
		__u16 neww = *(__u16 *)newb;
		bpf_l3_csum_replace(skb, ETH_HLEN + offsetof(struct iphdr, check), oldw, neww, 2);
		bpf_skb_store_bytes(skb, ETH_HLEN + offsetof(struct iphdr, tos), &tos, 1, 0);
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > data_end)
			return;
		__u8 *b = (__u8 *)ip6;
		__u8 tc = (DSCP_LE << 2) | ((b[1] >> 4) & 0x3);
		__u8 nb[2] = {(__u8)(0x60 | (tc >> 4)), (__u8)((tc << 4) | (b[1] & 0x0f))};
		bpf_skb_store_bytes(skb, ETH_HLEN, nb, 2, 0);
	}
}

// egress_class decides an egress packet's class (see the precedence
// above), setting skb->priority; it returns the class, 0 for the default.
static __always_inline __u32 egress_class(struct __sk_buff *skb, struct bpf_sock *sk)
{
	if (is_lanes_class(skb->priority))
		return skb->priority;
	int level;
#pragma unroll
	for (level = 1; level <= MAX_LEVEL; level++) {
		__u64 id = bpf_skb_ancestor_cgroup_id(skb, level);
		if (id == 0)
			break;
		__u32 *cls = bpf_map_lookup_elem(&lane_of_cgroup, &id);
		if (cls) {
			skb->priority = *cls;
			return *cls;
		}
	}
	if (sk) {
		__u32 *f = bpf_sk_storage_get(&followed, sk, 0, 0);
		if (f && is_lanes_class(*f)) {
			skb->priority = *f;
			return *f;
		}
	}
	return 0;
}

// rx_egress bounds the window an outgoing TCP packet advertises (see the
// top of this file). It records window scales from SYNs and SYN-ACKs.
static __always_inline void rx_egress(struct __sk_buff *skb, struct bpf_sock *sk, __u32 cls, struct rtts rtt)
{
	struct rx_limit *l = rx_limit_of(skb->ifindex, cls);
	if (!l)
		return;
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > data_end)
		return;
	struct rx_conn conn = {};
	struct tcphdr *th;
	__u32 l4off;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > data_end || ip->protocol != IPPROTO_TCP || ip->ihl < 5)
			return;
		l4off = ETH_HLEN + ip->ihl * 4;
		conn.family = 4;
		conn.laddr[0] = ip->saddr;
		conn.raddr[0] = ip->daddr;
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > data_end || ip6->nexthdr != IPPROTO_TCP)
			return;
		l4off = ETH_HLEN + sizeof(*ip6);
		conn.family = 6;
		__builtin_memcpy(conn.laddr, &ip6->saddr, 16);
		__builtin_memcpy(conn.raddr, &ip6->daddr, 16);
	} else {
		return;
	}
	if (l4off > 120)
		return;
	th = data + l4off;
	if ((void *)(th + 1) > data_end)
		return;
	conn.lport = th->source;
	conn.rport = th->dest;
	if (th->syn) {
		int ws = tcp_wscale(skb, l4off);
		if (th->ack) {
			// A passive open's SYN-ACK leaves from a request socket: its
			// scale (none if the peer's SYN offered none) waits by
			// connection for the full socket.
			__u8 v = ws < 0 ? 0 : ws;
			bpf_map_update_elem(&rx_synack, &conn, &v, BPF_ANY);
		} else if (sk) {
			// Our SYN's offer: confirmed by the peer's SYN-ACK at ingress.
			struct rx_sock *r = bpf_sk_storage_get(&rx_sock, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
			if (r) {
				r->wscale = ws < 0 ? 0 : ws;
				r->known = ws < 0;
				if (r->known)
					rx_count(RX_SOCKETS);
			}
		}
		return; // windows in SYNs are never scaled; lanes leaves them
	}
	if (!sk || sk->protocol != IPPROTO_TCP)
		return;
	struct rx_sock *r = bpf_sk_storage_get(&rx_sock, sk, 0, 0);
	if (!r) {
		__u8 *ws = bpf_map_lookup_elem(&rx_synack, &conn);
		if (!ws)
			return; // opened before lanes: its scale is unknown
		__u8 v = *ws;
		bpf_map_delete_elem(&rx_synack, &conn);
		r = bpf_sk_storage_get(&rx_sock, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
		if (!r)
			return;
		r->wscale = v;
		r->known = 1;
		rx_count(RX_SOCKETS);
	}
	if (!r->known)
		return;
	__u32 us = rtt.min ? rtt.min : rtt.srtt;
	if (!us)
		return;
	struct bpf_tcp_sock *tp = bpf_tcp_sock(sk);
	__u32 mss = tp && tp->mss_cache ? tp->mss_cache : 1460;
	__u64 bound = l->ceil_bps * us / 1000000;
	bound = bound * l->gain / 1024 + 4 * (__u64)mss;
	__u32 ws = r->wscale & 15;
	__u16 old = th->window;
	__u64 win = (__u64)bpf_ntohs(old) << ws;
	if (win <= bound)
		return;
	__u64 units = (bound + (1ULL << ws) - 1) >> ws;
	if (units == 0)
		units = 1;
	if (units > 0xffff)
		return;
	__u16 nw = bpf_htons((__u16)units);
	r->window = (__u32)(units << ws);
	bpf_l4_csum_replace(skb, l4off + offsetof(struct tcphdr, check), old, nw, 2);
	bpf_skb_store_bytes(skb, l4off + offsetof(struct tcphdr, window), &nw, 2, 0);
	rx_count(RX_LOWERED);
}

SEC("tc")
int lanes_egress(struct __sk_buff *skb)
{
	struct bpf_sock *sk = 0;
	struct bpf_sock *skc = skb->sk;
	if (skc)
		sk = bpf_sk_fullsock(skc);
	__u32 cls = egress_class(skb, sk);
	if (skb->protocol != bpf_htons(ETH_P_IP) && skb->protocol != bpf_htons(ETH_P_IPV6))
		return TC_ACT_OK; // ARP, and the idletime kick frame: neither foreground nor background
	__u32 flags = cls ? lane_flags_of(cls) : 0;
	if (flags & LANE_F_MARK_LE)
		mark_le(skb);
	struct rtts rtt = rtts_of(sk);
	idle_account(skb->ifindex, DIR_EGRESS, flags, rtt, skb->len);
	lane_rtt_account(cls, rtt);
	rx_egress(skb, sk, cls, rtt);
	return TC_ACT_OK;
}

// lane_of_sock returns the class for a socket found by lookup, or 0. The
// socket's cgroup is not available to tc programs (bpf_sk_cgroup_id is
// cgroup-skb only), so the fallback is the label lanes_sock_create left in
// the socket's storage.
static __always_inline __u32 lane_of_sock(struct bpf_sock *sk)
{
	__u32 prio = sk->priority;
	if (is_lanes_class(prio))
		return prio;
	__u32 *label = bpf_sk_storage_get(&auto_label, sk, 0, 0);
	if (label)
		return *label;
	return 0;
}

// follow returns the class a socket without a lanes label has: the one
// it followed earlier, or, when the packet carries DSCP LE or CS1 and its
// device follows, the device's follow class, which it then keeps.
static __always_inline __u32 follow(struct __sk_buff *skb, struct bpf_sock *sk, __u8 dscp)
{
	__u32 *f = bpf_sk_storage_get(&followed, sk, 0, 0);
	if (f)
		return *f;
	if (dscp != DSCP_LE && dscp != DSCP_CS1)
		return 0;
	if (sk->protocol == IPPROTO_TCP && sk->state == BPF_TCP_LISTEN)
		return 0; // a listener: its next connections need not be background
	__u32 ifindex = skb->ifindex;
	__u32 *cls = bpf_map_lookup_elem(&follow_of_dev, &ifindex);
	if (!cls)
		return 0;
	__u32 c = *cls;
	f = bpf_sk_storage_get(&followed, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (f)
		*f = c;
	return c;
}

// rx_synack_in confirms the window scale our SYN offered when the peer's
// SYN-ACK arrives: without its window option neither end scales.
static __always_inline void rx_synack_in(struct __sk_buff *skb, struct bpf_sock *sk, __u32 l4off)
{
	struct rx_sock *r = bpf_sk_storage_get(&rx_sock, sk, 0, 0);
	if (!r || r->known)
		return;
	if (tcp_wscale(skb, l4off) < 0)
		r->wscale = 0;
	r->known = 1;
	rx_count(RX_SOCKETS);
}

// lanes_ingress runs at clsact ingress of a shaped device: it finds the
// local socket an incoming IP packet is for and labels the packet with
// that socket's lane. It then lets classification continue
// (TC_ACT_UNSPEC) to the next filter, a u32 match-all with a mirred
// redirect to the device's IFB, whose HTB tree schedules the packet like
// the egress tree does. (bpf_redirect to an IFB works on recent kernels
// only: older IFBs drop packets a BPF program redirected.) Non-IP packets
// (ARP) stop here, unshaped.
SEC("tc")
int lanes_ingress(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > data_end)
		goto out;

	struct bpf_sock_tuple tuple = {};
	__u32 tuple_len = 0;
	__u8 proto = 0;
	__u8 dscp = 0;
	void *l4 = 0;

	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > data_end)
			goto out;
		if (ip->ihl != 5 || (ip->frag_off & bpf_htons(0x1fff)))
			goto out;
		proto = ip->protocol;
		dscp = ip->tos >> 2;
		l4 = (void *)(ip + 1);
		tuple.ipv4.saddr = ip->saddr;
		tuple.ipv4.daddr = ip->daddr;
		tuple_len = sizeof(tuple.ipv4);
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > data_end)
			goto out;
		proto = ip6->nexthdr;
		dscp = ((((__u8 *)ip6)[0] & 0x0f) << 2) | (((__u8 *)ip6)[1] >> 6);
		l4 = (void *)(ip6 + 1);
		__builtin_memcpy(tuple.ipv6.saddr, &ip6->saddr, 16);
		__builtin_memcpy(tuple.ipv6.daddr, &ip6->daddr, 16);
		tuple_len = sizeof(tuple.ipv6);
	} else {
		// ARP and other non-IP traffic is not shaped: it must never
		// wait behind a bulk download.
		return TC_ACT_OK;
	}

	struct bpf_sock *sk = 0;
	if (proto == IPPROTO_TCP) {
		struct tcphdr *th = l4;
		if ((void *)(th + 1) > data_end)
			goto out;
		if (tuple_len == sizeof(tuple.ipv4)) {
			tuple.ipv4.sport = th->source;
			tuple.ipv4.dport = th->dest;
		} else {
			tuple.ipv6.sport = th->source;
			tuple.ipv6.dport = th->dest;
		}
		sk = bpf_sk_lookup_tcp(skb, &tuple, tuple_len, BPF_F_CURRENT_NETNS, 0);
		if (sk && th->syn && th->ack)
			rx_synack_in(skb, sk, (__u32)((void *)th - data));
	} else if (proto == IPPROTO_UDP) {
		struct udphdr *uh = l4;
		if ((void *)(uh + 1) > data_end)
			goto out;
		if (tuple_len == sizeof(tuple.ipv4)) {
			tuple.ipv4.sport = uh->source;
			tuple.ipv4.dport = uh->dest;
		} else {
			tuple.ipv6.sport = uh->source;
			tuple.ipv6.dport = uh->dest;
		}
		sk = bpf_sk_lookup_udp(skb, &tuple, tuple_len, BPF_F_CURRENT_NETNS, 0);
	} else if (proto == IPPROTO_ICMP || proto == IPPROTO_ICMPV6) {
		// An echo reply (type 0; ICMPv6 129) or a timestamp reply
		// (type 14) to one of lanesd's probes: the identifier is in
		// bytes 4-5 of both.
		__u8 *ic = l4;
		if ((void *)(ic + 8) > data_end)
			goto out;
		if (proto == IPPROTO_ICMP ? ic[0] == 0 || ic[0] == 14 : ic[0] == 129) {
			__u16 id = *(__u16 *)(ic + 4);
			__u32 *pc = bpf_map_lookup_elem(&probe_class, &id);
			if (pc) {
				__u32 c = *pc;
				skb->priority = c;
				idle_account(skb->ifindex, DIR_INGRESS, lane_flags_of(c), (struct rtts){}, skb->len);
				return TC_ACT_UNSPEC;
			}
		}
	}
	__u32 cls = 0;
	struct rtts rtt = {};
	if (sk) {
		cls = lane_of_sock(sk);
		if (!cls)
			cls = follow(skb, sk, dscp);
		rtt = rtts_of(sk);
		bpf_sk_release(sk);
		if (cls)
			skb->priority = cls;
	}
	idle_account(skb->ifindex, DIR_INGRESS, cls ? lane_flags_of(cls) : 0, rtt, skb->len);
	return TC_ACT_UNSPEC;
out:
	idle_account(skb->ifindex, DIR_INGRESS, 0, (struct rtts){}, skb->len);
	return TC_ACT_UNSPEC;
}
