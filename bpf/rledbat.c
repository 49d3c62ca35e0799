//go:build ignore

// lanes_rledbat: the receive side of lanes' background transport, after
// rLEDBAT (RFC 9840): a background lane's TCP downloads yield to other
// traffic at a bottleneck lanes does not shape, without ingress shaping,
// by the receiver bounding its own window from the delay it measures.
//
// A BPF TCP iterator that package netsched runs every 20 ms while
// background sockets receive (every 250 ms otherwise): for
// each TCP socket of a class that lane_flags marks LANE_F_RLEDBAT (its
// priority, else the class lanes gave it at creation: lanes.c's
// auto_label), while it receives data:
//
//  - Delay: the kernel's receiver RTT estimate (tcp_sock.rcv_rtt_est,
//    measured from TCP timestamps: the time from sending a TSval to
//    receiving data that echoes it, so it includes the queue the
//    download builds at the bottleneck; falling samples are taken at
//    once, rising ones with gain 1/8). The base delay is the minimum over
//    the last BASE_BUCKETS one-minute minima; the queueing delay the
//    estimate's excess over it.
//  - Window W, bytes: slow start doubles it per RTT until the queueing
//    delay passes 3/4 TARGET; then per RTT +GAIN segments below TARGET
//    and max(GAIN - W/MSS x (qd/TARGET - 1), -W/2) segments above (as
//    LEDBAT++), GAIN = 1 / min(16, ceil(2 x TARGET / base)). Steps are
//    scaled by the time since the last run over the RTT.
//  - Slowdowns: 2 RTTs after slow start, and then 9 times a slowdown's
//    length after its end, W drops to 2 segments for 2 RTTs so that the
//    queue drains and the base delay is measured again; slow start takes
//    W back to where it was.
//  - W, at least 2 segments, becomes the socket's TCP_WINDOW_CLAMP: the
//    window it advertises stops growing past W (a window already
//    advertised is not taken back; it closes as data arrives).
//
// The clamp is lifted (the socket's receive buffer bounds its window
// again) when a socket leaves such a class. Per-socket state is in rl_state.

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char __license[] SEC("license") = "GPL";

#define LANES_MAJOR 0x4c4e
#define LANE_F_RLEDBAT 16
// target_us is TARGET, µs: 60 ms (rLEDBAT's), and what netsched sets from
// [net.ledbat] target once the program is loaded.
volatile __u32 target_us = 60000;
#define BASE_BUCKETS 10
#define BUCKET_NS (60ULL * 1000000000ULL)
#define MAX_GAIN_DIV 16U
#define SLOWDOWN_RTTS 2U
#define SLOWDOWN_GAP 9U
#define MIN_SEGS 2U
#define NO_DELAY 0xffffffffU
#define Q 65536ULL
#define SOL_TCP 6
#define TCP_WINDOW_CLAMP 10
#define TCP_ESTABLISHED 1
#define RL_NO_CLAMP (65535U << 14) // the largest window TCP can advertise

// Kernel types, only the members used; CO-RE relocates them against the
// running kernel's BTF.
struct sock_common {
	volatile unsigned char skc_state;
} __attribute__((preserve_access_index));

struct sock {
	struct sock_common __sk_common;
	__u32 sk_priority;
	int sk_rcvbuf;
} __attribute__((preserve_access_index));

struct tcp_rtt_est {
	__u32 rtt_us;
} __attribute__((preserve_access_index));

struct tcp_sock {
	__u64 bytes_received;
	__u32 window_clamp;
	__u32 rcv_wnd;
	__u16 advmss;
	struct {
		__u32 rtt_us;
		__u32 seq;
		__u64 time;
	} rcv_rtt_est;
} __attribute__((preserve_access_index));

struct bpf_iter_meta {
	void *seq;
	__u64 session_id;
	__u64 seq_num;
} __attribute__((preserve_access_index));

struct bpf_iter__tcp {
	struct bpf_iter_meta *meta;
	struct sock_common *sk_common;
	__u32 uid;
} __attribute__((preserve_access_index));

struct bpf_map;

struct bpf_iter__bpf_sk_storage_map {
	struct bpf_iter_meta *meta;
	struct bpf_map *map;
	struct sock *sk;
	void *value;
} __attribute__((preserve_access_index));

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u32);
} lane_flags SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u32);
} auto_label SEC(".maps");

enum { RL_SLOW_START = 0, RL_AVOID = 1, RL_SLOWDOWN = 2, RL_RAMP = 3 };

// rl_state is a socket's receive-side state.
struct rl_state {
	__u64 last_ns;          // the last run that saw the socket
	__u64 bucket_ns;        // when base[base_i] began
	__u64 phase_ns;         // when the phase began
	__u64 next_slowdown_ns; // 0: none scheduled
	__u64 slowdown_ns;      // when the last slowdown began
	__u64 rcvd;             // bytes_received at the last run
	__s64 acc;              // fraction of a segment, Q units
	__u32 base[BASE_BUCKETS];
	__u32 base_i;
	__u32 wnd;       // bytes
	__u32 saved_wnd; // the window a slowdown returns to
	__u32 phase;
	__u32 on;        // 1: lanes clamps it
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct rl_state);
} rl_state SEC(".maps");

// rl_stats counts (RL_* indexes).
#define RL_SOCKETS 0  // background sockets seen receiving, summed over runs
#define RL_CLAMPED 1  // clamps set
#define RL_RELEASED 2 // clamps given back
#define RL_NSTATS 3
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, RL_NSTATS);
	__type(key, __u32);
	__type(value, __u64);
} rl_stats SEC(".maps");

static __always_inline void rl_count(__u32 i)
{
	__u64 *n = bpf_map_lookup_elem(&rl_stats, &i);
	if (n)
		__sync_fetch_and_add(n, 1);
}

static __always_inline __u32 min32(__u32 a, __u32 b) { return a < b ? a : b; }
static __always_inline __u32 max32(__u32 a, __u32 b) { return a > b ? a : b; }

static __always_inline int is_lanes_class(__u32 prio)
{
	return (prio >> 16) == LANES_MAJOR && (prio & 0xffff) != 0;
}

static __always_inline __u32 rl_base(struct rl_state *s)
{
	__u32 m = NO_DELAY;
	int i;
	for (i = 0; i < BASE_BUCKETS; i++)
		m = min32(m, s->base[i]);
	return m;
}

static __always_inline void rl_sample(struct rl_state *s, __u32 rtt_us, __u64 now)
{
	__u32 bi = s->base_i;
	if (bi >= BASE_BUCKETS)
		bi = 0;
	if (now - s->bucket_ns >= BUCKET_NS) {
		bi = bi + 1 >= BASE_BUCKETS ? 0 : bi + 1;
		s->base[bi] = rtt_us;
		s->bucket_ns = now;
	} else if (rtt_us < s->base[bi]) {
		s->base[bi] = rtt_us;
	}
	s->base_i = bi;
}

static __always_inline __u64 rl_gain(__u32 base_us)
{
	__u32 div = MAX_GAIN_DIV;
	if (base_us && base_us != NO_DELAY) {
		__u64 d = (2ULL * target_us + base_us - 1) / base_us;
		if (d < div)
			div = d;
		if (div < 1)
			div = 1;
	}
	return Q / div;
}

static __always_inline void rl_phase(struct rl_state *s, __u32 phase, __u64 now)
{
	s->phase = phase;
	s->phase_ns = now;
	s->acc = 0;
}

// rl_step moves the window for dt ns at RTT rtt_us with queueing delay qd.
static __always_inline void rl_step(struct rl_state *s, __u32 mss, __u32 rtt_us, __u32 base, __u32 qd, __u64 dt, __u64 now)
{
	__u64 rtt_ns = (__u64)rtt_us * 1000;
	__u32 min_wnd = MIN_SEGS * mss;
	// rounds: the RTTs dt spans, Q units, at most 1 (a late run does not
	// take a big step).
	__u64 rounds = dt >= rtt_ns ? Q : dt * Q / rtt_ns;
	switch (s->phase) {
	case RL_SLOWDOWN:
		if (now - s->phase_ns >= SLOWDOWN_RTTS * rtt_ns) {
			rl_phase(s, RL_RAMP, now);
		}
		s->wnd = min_wnd;
		return;
	case RL_SLOW_START:
	case RL_RAMP:
		if (qd * 4 > target_us * 3) {
			if (s->phase == RL_SLOW_START)
				s->next_slowdown_ns = now + SLOWDOWN_RTTS * rtt_ns;
			rl_phase(s, RL_AVOID, now);
			break;
		}
		// Doubling per RTT, by GAIN: W += W x GAIN x rounds.
		s->wnd += (__u32)(((__u64)s->wnd * rl_gain(base) / Q) * rounds / Q);
		if (s->phase == RL_RAMP && s->wnd >= s->saved_wnd) {
			s->wnd = s->saved_wnd;
			rl_phase(s, RL_AVOID, now);
		}
		break;
	default: {
		// In bytes per RTT, Q units: +GAIN segments, or the decrease.
		__s64 step = (__s64)rl_gain(base) * mss;
		if (qd > target_us) {
			__s64 excess = (__s64)(((__u64)qd * Q) / target_us) - (__s64)Q; // qd/T - 1, Q units
			__s64 dec = (__s64)(s->wnd) * excess;                         // W x (qd/T - 1)
			__s64 half = (__s64)s->wnd * (__s64)Q / 2;
			step -= dec > half ? half : dec;
		}
		// step x rounds / Q: rounds is at most Q, so the product fits.
		s->acc += (step >> 8) * (__s64)rounds >> 8;
		__s64 whole = s->acc >> 16; // floor(acc / Q)
		s->acc -= whole << 16;
		__s64 w = (__s64)s->wnd + whole;
		s->wnd = w < (__s64)min_wnd ? min_wnd : (__u32)w;
		break;
	}
	}
	if (s->wnd < min_wnd)
		s->wnd = min_wnd;
	if (s->next_slowdown_ns && now >= s->next_slowdown_ns && s->phase == RL_AVOID) {
		s->saved_wnd = s->wnd;
		s->slowdown_ns = now;
		s->next_slowdown_ns = 0;
		rl_phase(s, RL_SLOWDOWN, now);
		s->wnd = min_wnd;
	}
	if (s->phase == RL_AVOID && !s->next_slowdown_ns && s->slowdown_ns) {
		// The slowdown ended: the next begins 9 of its lengths later.
		s->next_slowdown_ns = now + SLOWDOWN_GAP * (now - s->slowdown_ns);
	}
}

static __always_inline void set_clamp(void *sk, __u32 v)
{
	int val = (int)v;
	if (bpf_setsockopt(sk, SOL_TCP, TCP_WINDOW_CLAMP, &val, sizeof(val)) == 0)
		rl_count(RL_CLAMPED);
}

// The gate: a run of lanes_rledbat walks the whole TCP hash of the
// namespace, empty buckets included (about a millisecond on a large host),
// so the runner first asks the gate programs, which walk only the sockets
// that have storage in a map: lanes_rledbat_gate_label over auto_label
// (the sockets made in a lane's group or moved into one) counts those of
// a lane with LANE_F_RLEDBAT, lanes_rledbat_gate_state over rl_state those
// whose window lanes still clamps (to be given back when they leave the
// lane). No count, no run: nothing to bound or give back. (A socket that
// joined a lane's class by its priority alone, with no label, is not
// counted.)
volatile __u64 gate_hits = 0;

SEC("iter/bpf_sk_storage_map")
int lanes_rledbat_gate_label(struct bpf_iter__bpf_sk_storage_map *ctx)
{
	__u32 *label = ctx->value;

	if (!ctx->sk || !label)
		return 0;
	__u32 cls = *label;
	__u32 *f = bpf_map_lookup_elem(&lane_flags, &cls);
	if (f && (*f & LANE_F_RLEDBAT))
		gate_hits++;
	return 0;
}

SEC("iter/bpf_sk_storage_map")
int lanes_rledbat_gate_state(struct bpf_iter__bpf_sk_storage_map *ctx)
{
	struct rl_state *s = ctx->value;

	if (ctx->sk && s && s->on)
		gate_hits++;
	return 0;
}

SEC("iter/tcp")
int lanes_rledbat(struct bpf_iter__tcp *ctx)
{
	struct sock_common *skc = ctx->sk_common;
	if (!skc)
		return 0;
	struct tcp_sock *tp = bpf_skc_to_tcp_sock(skc);
	if (!tp)
		return 0;
	struct sock *sk = (struct sock *)tp;
	if (sk->__sk_common.skc_state != TCP_ESTABLISHED)
		return 0;
	__u32 cls = sk->sk_priority;
	if (!is_lanes_class(cls)) {
		__u32 *label = bpf_sk_storage_get(&auto_label, sk, 0, 0);
		cls = label ? *label : 0;
	}
	__u32 *f = is_lanes_class(cls) ? bpf_map_lookup_elem(&lane_flags, &cls) : 0;
	int want = f && (*f & LANE_F_RLEDBAT);
	struct rl_state *s = bpf_sk_storage_get(&rl_state, sk, 0, want ? BPF_SK_STORAGE_GET_F_CREATE : 0);
	if (!s)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	if (!want) {
		if (s->on) {
			// Left the lane: the receive buffer bounds the window
			// again (autotuning lowers the clamp to it as it grows).
			set_clamp(sk, RL_NO_CLAMP);
			s->on = 0;
			rl_count(RL_RELEASED);
		}
		return 0;
	}
	__u32 mss = max32(tp->advmss, 536);
	__u64 rcvd = tp->bytes_received;
	if (!s->last_ns) {
		int i;
		for (i = 0; i < BASE_BUCKETS; i++)
			s->base[i] = NO_DELAY;
		s->bucket_ns = now;
		s->wnd = max32(tp->rcv_wnd, 10 * mss);
		s->rcvd = rcvd;
		s->last_ns = now;
		rl_phase(s, RL_SLOW_START, now);
		if (rcvd)
			rl_count(RL_SOCKETS); // receiving: the runner goes fast
		return 0;
	}
	__u64 dt = now - s->last_ns;
	s->last_ns = now;
	if (rcvd == s->rcvd)
		return 0; // nothing received: no delay to learn from, no window to set
	s->rcvd = rcvd;
	rl_count(RL_SOCKETS);
	__u32 rtt = tp->rcv_rtt_est.rtt_us >> 3;
	if (!rtt)
		return 0; // no timestamps (or no sample yet): leave it alone
	rl_sample(s, rtt, now);
	__u32 base = rl_base(s);
	__u32 qd = rtt > base ? rtt - base : 0;
	rl_step(s, mss, rtt, base, qd, dt, now);
	s->on = 1;
	set_clamp(sk, s->wnd);
	return 0;
}
