//go:build ignore

// lanes_ledbat: a background TCP congestion control after LEDBAT++
// (draft-irtf-iccrg-ledbat-plus-plus), registered as a BPF struct_ops
// tcp_congestion_ops by package ledbat and given to the TCP sockets of
// lanes with net.cc = "ledbat" (bpf/lanes.c, lanes_sockops; netsched).
//
// The window follows the queueing delay the connection measures, so that
// a background flow uses what is free at the bottleneck, wherever that is,
// and gets out of the way of any loss-based flow sharing it:
//
//  - Delays are round-trip times (ACK samples), not one-way delays. The
//    base delay is the minimum over the last BASE_BUCKETS one-minute
//    minima; the current delay the minimum of the last CUR_SAMPLES
//    samples; the queueing delay their difference.
//  - GAIN = 1 / min(16, ceil(2 * TARGET / base delay)): a flow with a short
//    base delay ramps up slower, so flows of different RTTs share alike.
//  - Congestion avoidance, per RTT: +GAIN below TARGET, and above it
//    max(GAIN - W * (queueing delay / TARGET - 1), -W/2): a multiplicative
//    decrease that grows with the excess delay. Applied per ACK in
//    proportion to the packets it acknowledges.
//  - Slow start grows by GAIN per acknowledged packet and ends when the
//    queueing delay exceeds 3/4 TARGET (or at a loss).
//  - Slowdowns: 2 RTTs after slow start, and then periodically, the window
//    drops to 2 packets for 2 RTTs (the queue drains, the base delay is
//    measured again) and slow start takes it back to where it was; the
//    next slowdown starts 9 times the last one's length after its end, so
//    slowdowns cost at most a tenth of the time.
//  - A loss halves the window (ssthresh), like Reno.
//
// Windows are in packets; fractions accumulate in fixed point (Q = 2^16).
// The rules are pure functions of struct ledbat and struct ledbat_vars so
// that the syscall program ledbat_test can run them on given inputs from
// the tests (package ledbat); the struct_ops callbacks copy the socket's
// state to the stack, apply them and copy it back (the verifier accepts
// only constant offsets into a socket).

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char __license[] SEC("license") = "GPL";

#define Q 65536LL
// target_us is TARGET, the queueing delay the window steers to, µs:
// LEDBAT++'s 60 ms here, and what package ledbat sets (lanesd: [net.ledbat]
// target) once the program is loaded; it may change while sockets use it.
volatile __u32 target_us = 60000;
#define BASE_BUCKETS 10
#define CUR_SAMPLES 4
#define BUCKET_MS 60000U
#define MAX_GAIN_DIV 16U
#define SLOWDOWN_RTTS 2U
#define SLOWDOWN_GAP 9U
#define MIN_CWND 2U
#define NO_DELAY 0xffffffffU

// Kernel types, only the members used; CO-RE relocates them against the
// running kernel's BTF.
struct sock {
} __attribute__((preserve_access_index));

struct inet_connection_sock {
	__u64 icsk_ca_priv[13];
} __attribute__((preserve_access_index));

struct tcp_sock {
	__u32 snd_cwnd;
	__u32 snd_cwnd_clamp;
	__u32 snd_ssthresh;
	__u32 prior_cwnd;
	__u32 srtt_us;
	__u32 max_packets_out;
	__u64 tcp_mstamp;
} __attribute__((preserve_access_index));

struct ack_sample {
	__u32 pkts_acked;
	__s32 rtt_us;
	__u32 in_flight;
} __attribute__((preserve_access_index));

enum { PH_SLOW_START = 0, PH_AVOID = 1, PH_SLOWDOWN = 2, PH_RAMP = 3 };

#define F_SLOWDOWN_DUE 1

// struct ledbat is a connection's state, in icsk_ca_priv (at most 104
// bytes). Times are milliseconds of tcp_mstamp, compared by difference.
struct ledbat {
	__s64 acc;               // fraction of a window step, Q units
	__u32 base[BASE_BUCKETS]; // per-minute minimum RTTs, µs; NO_DELAY = none
	__u32 cur[CUR_SAMPLES];  // last RTT samples, µs
	__u32 bucket_ms;         // when base[base_i] began
	__u32 phase;
	__u32 base_i, cur_i;
	__u32 phase_ms;          // when the phase began
	__u32 slowdown_ms;       // when the last slowdown began
	__u32 next_slowdown_ms;  // with F_SLOWDOWN_DUE: when the next begins
	__u32 saved_cwnd;        // the window a slowdown returns to
	__u32 flags;
};

_Static_assert(sizeof(struct ledbat) <= 104, "struct ledbat must fit icsk_ca_priv");

// struct ledbat_vars is what the rules read and write of the socket.
struct ledbat_vars {
	__u32 cwnd;
	__u32 ssthresh;
	__u32 clamp;
	__u32 srtt_us;  // smoothed RTT, µs (not the kernel's << 3)
	__u32 max_out;  // packets in flight at most in the last window
	__u32 now_ms;
};

static __always_inline __u32 min32(__u32 a, __u32 b) { return a < b ? a : b; }
static __always_inline __u32 max32(__u32 a, __u32 b) { return a > b ? a : b; }

static __always_inline void lb_init(struct ledbat *s, __u32 now_ms)
{
	int i;
	__builtin_memset(s, 0, sizeof(*s));
	for (i = 0; i < BASE_BUCKETS; i++)
		s->base[i] = NO_DELAY;
	for (i = 0; i < CUR_SAMPLES; i++)
		s->cur[i] = NO_DELAY;
	s->bucket_ms = now_ms;
	s->phase = PH_SLOW_START;
	s->phase_ms = now_ms;
}

static __always_inline __u32 lb_base(struct ledbat *s)
{
	__u32 m = NO_DELAY;
	int i;
	for (i = 0; i < BASE_BUCKETS; i++)
		m = min32(m, s->base[i]);
	return m;
}

static __always_inline __u32 lb_current(struct ledbat *s)
{
	__u32 m = NO_DELAY;
	int i;
	for (i = 0; i < CUR_SAMPLES; i++)
		m = min32(m, s->cur[i]);
	return m;
}

// lb_qdelay returns the queueing delay in µs, or NO_DELAY before samples.
static __always_inline __u32 lb_qdelay(struct ledbat *s)
{
	__u32 b = lb_base(s), c = lb_current(s);
	if (b == NO_DELAY || c == NO_DELAY)
		return NO_DELAY;
	return c > b ? c - b : 0;
}

// lb_gain returns GAIN in Q units for a base delay in µs.
static __always_inline __s64 lb_gain(__u32 base_us)
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

static __always_inline void lb_sample(struct ledbat *s, __u32 rtt_us, __u32 now_ms)
{
	__u32 ci = s->cur_i;
	if (ci >= CUR_SAMPLES)
		ci = 0;
	s->cur[ci] = rtt_us;
	s->cur_i = ci + 1 >= CUR_SAMPLES ? 0 : ci + 1;

	__u32 bi = s->base_i;
	if (bi >= BASE_BUCKETS)
		bi = 0;
	if (now_ms - s->bucket_ms >= BUCKET_MS) {
		bi = bi + 1 >= BASE_BUCKETS ? 0 : bi + 1;
		s->base[bi] = rtt_us;
		s->bucket_ms = now_ms;
	} else if (rtt_us < s->base[bi]) {
		s->base[bi] = rtt_us;
	}
	s->base_i = bi;
}

static __always_inline __u32 rtt_ms(struct ledbat_vars *v)
{
	return max32(v->srtt_us / 1000, 1);
}

static __always_inline void set_phase(struct ledbat *s, __u32 phase, __u32 now_ms)
{
	s->phase = phase;
	s->phase_ms = now_ms;
	s->acc = 0;
}

// lb_avoid_from ends a slow start: congestion avoidance from here, with
// the next slowdown due 2 RTTs later after the first slow start and 9
// slowdown lengths later after a slowdown's ramp.
static __always_inline void lb_avoid_from(struct ledbat *s, struct ledbat_vars *v)
{
	__u32 now = v->now_ms;
	if (s->phase == PH_RAMP) {
		__u32 len = now - s->slowdown_ms;
		s->next_slowdown_ms = now + SLOWDOWN_GAP * len;
	} else {
		s->next_slowdown_ms = now + SLOWDOWN_RTTS * rtt_ms(v);
	}
	s->flags |= F_SLOWDOWN_DUE;
	v->ssthresh = v->cwnd;
	set_phase(s, PH_AVOID, now);
}

// lb_grow_ss grows the window by GAIN per acknowledged packet.
static __always_inline void lb_grow_ss(struct ledbat *s, struct ledbat_vars *v, __u32 acked, __s64 gain)
{
	s->acc += gain * acked;
	if (s->acc >= Q) {
		__u32 n = s->acc / Q;
		v->cwnd += n;
		s->acc -= (__s64)n * Q;
	}
}

// lb_ack applies the window rules to an ACK of acked packets.
static __always_inline void lb_ack(struct ledbat *s, struct ledbat_vars *v, __u32 acked)
{
	__u32 now = v->now_ms;
	__u32 qd = lb_qdelay(s);
	__s64 gain = lb_gain(lb_base(s));
	// Growing needs a window in use (the kernel's slow-start test of
	// tcp_is_cwnd_limited): an application-limited flow stays put.
	int limited = v->cwnd < 2 * v->max_out;

	switch (s->phase) {
	case PH_SLOWDOWN:
		v->cwnd = MIN_CWND;
		if (now - s->phase_ms >= SLOWDOWN_RTTS * rtt_ms(v))
			set_phase(s, PH_RAMP, now);
		break;
	case PH_SLOW_START:
	case PH_RAMP:
		if (qd != NO_DELAY && qd * 4 > target_us * 3) {
			lb_avoid_from(s, v);
			break;
		}
		if (s->phase == PH_RAMP && v->cwnd >= s->saved_cwnd) {
			lb_avoid_from(s, v);
			break;
		}
		if (limited)
			lb_grow_ss(s, v, acked, gain);
		break;
	case PH_AVOID:
	default:
		if ((s->flags & F_SLOWDOWN_DUE) && (__s32)(now - s->next_slowdown_ms) >= 0) {
			s->flags &= ~F_SLOWDOWN_DUE;
			s->saved_cwnd = v->cwnd;
			s->slowdown_ms = now;
			v->cwnd = MIN_CWND;
			set_phase(s, PH_SLOWDOWN, now);
			break;
		}
		if (qd == NO_DELAY)
			break;
		__s64 w = v->cwnd;
		__s64 d = gain; // per RTT, Q units of packets
		if (qd > target_us) {
			__s64 excess = ((__s64)qd * Q) / target_us - Q; // qd/T - 1
			d = gain - w * excess;
			if (d < -w * Q / 2)
				d = -w * Q / 2;
		}
		if (d > 0 && !limited)
			break;
		s->acc += d * acked;
		__s64 step = w * Q;
		if (s->acc >= step) {
			__u64 n = (__u64)s->acc / (__u64)step;
			v->cwnd += n;
			s->acc -= (__s64)n * step;
		} else if (s->acc <= -step) {
			__u64 n = (__u64)(-s->acc) / (__u64)step;
			v->cwnd = v->cwnd > n + MIN_CWND ? v->cwnd - n : MIN_CWND;
			s->acc += (__s64)n * step;
		}
		break;
	}
	if (v->clamp && v->cwnd > v->clamp)
		v->cwnd = v->clamp;
}

// lb_loss returns the window after a loss (the new ssthresh) and ends a
// slow start.
static __always_inline __u32 lb_loss(struct ledbat *s, struct ledbat_vars *v)
{
	__u32 w = v->cwnd;
	if (s->phase == PH_SLOWDOWN || s->phase == PH_RAMP)
		w = max32(w, s->saved_cwnd);
	w = max32(w / 2, MIN_CWND);
	if (s->phase != PH_AVOID) {
		v->cwnd = w;
		lb_avoid_from(s, v);
	}
	return w;
}

// Socket glue.

static __always_inline struct ledbat *ca_of(struct sock *sk)
{
	return (void *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

static __always_inline void load(struct sock *sk, struct ledbat *s, struct ledbat_vars *v)
{
	struct tcp_sock *tp = (void *)sk;
	__builtin_memcpy(s, ca_of(sk), sizeof(*s));
	v->cwnd = tp->snd_cwnd;
	v->ssthresh = tp->snd_ssthresh;
	v->clamp = tp->snd_cwnd_clamp;
	v->srtt_us = tp->srtt_us >> 3;
	v->max_out = tp->max_packets_out;
	v->now_ms = tp->tcp_mstamp / 1000;
}

static __always_inline void store(struct sock *sk, struct ledbat *s, struct ledbat_vars *v)
{
	struct tcp_sock *tp = (void *)sk;
	__builtin_memcpy(ca_of(sk), s, sizeof(*s));
	tp->snd_cwnd = v->cwnd;
	tp->snd_ssthresh = v->ssthresh;
}

SEC("struct_ops/ledbat_init")
void ledbat_init(unsigned long long *ctx)
{
	struct sock *sk = (void *)ctx[0];
	struct tcp_sock *tp = (void *)sk;
	struct ledbat s;
	lb_init(&s, tp->tcp_mstamp / 1000);
	__builtin_memcpy(ca_of(sk), &s, sizeof(s));
}

SEC("struct_ops/ledbat_cong_avoid")
void ledbat_cong_avoid(unsigned long long *ctx)
{
	struct sock *sk = (void *)ctx[0];
	__u32 acked = ctx[2];
	struct ledbat s;
	struct ledbat_vars v;
	load(sk, &s, &v);
	lb_ack(&s, &v, acked);
	store(sk, &s, &v);
}

SEC("struct_ops/ledbat_pkts_acked")
void ledbat_pkts_acked(unsigned long long *ctx)
{
	struct sock *sk = (void *)ctx[0];
	const struct ack_sample *as = (void *)ctx[1];
	__s32 rtt = as->rtt_us;
	if (rtt <= 0)
		return;
	struct ledbat s;
	struct ledbat_vars v;
	load(sk, &s, &v);
	lb_sample(&s, rtt, v.now_ms);
	__builtin_memcpy(ca_of(sk), &s, sizeof(s));
}

SEC("struct_ops/ledbat_ssthresh")
__u32 ledbat_ssthresh(unsigned long long *ctx)
{
	struct sock *sk = (void *)ctx[0];
	struct ledbat s;
	struct ledbat_vars v;
	load(sk, &s, &v);
	__u32 w = lb_loss(&s, &v);
	__builtin_memcpy(ca_of(sk), &s, sizeof(s));
	return w;
}

SEC("struct_ops/ledbat_undo_cwnd")
__u32 ledbat_undo_cwnd(unsigned long long *ctx)
{
	struct sock *sk = (void *)ctx[0];
	struct tcp_sock *tp = (void *)sk;
	return max32(tp->snd_cwnd, tp->prior_cwnd);
}

struct tcp_congestion_ops {
	__u32 (*ssthresh)(struct sock *sk);
	void (*cong_avoid)(struct sock *sk, __u32 ack, __u32 acked);
	void (*pkts_acked)(struct sock *sk, const struct ack_sample *sample);
	__u32 (*undo_cwnd)(struct sock *sk);
	void (*init)(struct sock *sk);
	char name[16];
};

SEC(".struct_ops.link")
struct tcp_congestion_ops lanes_ledbat = {
	.ssthresh = (void *)ledbat_ssthresh,
	.cong_avoid = (void *)ledbat_cong_avoid,
	.pkts_acked = (void *)ledbat_pkts_acked,
	.undo_cwnd = (void *)ledbat_undo_cwnd,
	.init = (void *)ledbat_init,
	.name = "lanes_ledbat",
};

// Rule tests (package ledbat): a syscall program that applies one rule to
// the state and variables in the single entry of ledbat_test_io (a map
// value, as the verifier allows only constant offsets into a context).

enum { OP_INIT = 0, OP_SAMPLE = 1, OP_ACK = 2, OP_LOSS = 3, OP_GAIN = 4, OP_QDELAY = 5 };

struct ledbat_test_ctx {
	__u32 op;
	__u32 arg; // OP_SAMPLE: RTT µs; OP_ACK: packets acked; OP_GAIN: base µs
	__s64 ret;
	struct ledbat s;
	struct ledbat_vars v;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ledbat_test_ctx);
} ledbat_test_io SEC(".maps");

SEC("syscall")
int ledbat_test(void *ctx)
{
	__u32 zero = 0;
	struct ledbat_test_ctx *c = bpf_map_lookup_elem(&ledbat_test_io, &zero);
	if (!c)
		return -1;
	struct ledbat s;
	struct ledbat_vars v;
	__builtin_memcpy(&s, &c->s, sizeof(s));
	__builtin_memcpy(&v, &c->v, sizeof(v));
	switch (c->op) {
	case OP_INIT:
		lb_init(&s, v.now_ms);
		break;
	case OP_SAMPLE:
		lb_sample(&s, c->arg, v.now_ms);
		break;
	case OP_ACK:
		lb_ack(&s, &v, c->arg);
		break;
	case OP_LOSS:
		c->ret = lb_loss(&s, &v);
		break;
	case OP_GAIN:
		c->ret = lb_gain(c->arg);
		break;
	case OP_QDELAY:
		c->ret = lb_qdelay(&s);
		break;
	default:
		return -1;
	}
	__builtin_memcpy(&c->s, &s, sizeof(s));
	__builtin_memcpy(&c->v, &v, sizeof(v));
	return 0;
}
