//go:build ignore

// lanes_procsettle: what processes just moved into a lane still have
// outside it, for lanesd's rule placement (package procwatch). A BPF
// syscall program, run once per placement batch (BPF_PROG_RUN) after the
// batch's processes were moved and given their I/O priority: for each
// process of the batch (by PID and start time) it reports
//
//  - its thread count (signal->nr_threads): above one, threads started
//    since its exec may lack the new I/O priority (a thread takes its
//    creator's priority when it is created);
//  - its child processes whose cgroups differ from its own (another
//    css_set): forked before the move, they stayed where they were. A
//    child is on the list of the thread that forked it, so every thread's
//    list is walked (a Go or Java program forks from any of its threads);
//  - whether one of its descriptors is a socket (a socket keeps the
//    cgroup it was made in, so its traffic would not be the lane's); only
//    the first 4096 are looked at, and open ones beyond are reported.
//
// It replaces, per process, three listings in /proc (task/, the
// children file, fd/ with a readlink per descriptor) with one system call
// for the whole batch. A fork, a thread or a socket made after the move
// and the priority is in the lane's group with the lane's priority.

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

char __license[] SEC("license") = "GPL";

struct list_head {
	struct list_head *next;
	struct list_head *prev;
};

struct signal_struct {
	int nr_threads;
	struct list_head thread_head;
} __attribute__((preserve_access_index));

struct inode {
	unsigned short i_mode;
} __attribute__((preserve_access_index));

struct file {
	struct inode *f_inode;
} __attribute__((preserve_access_index));

struct fdtable {
	unsigned int max_fds;
	struct file **fd;
	unsigned long *open_fds;
} __attribute__((preserve_access_index));

struct files_struct {
	struct fdtable *fdt;
} __attribute__((preserve_access_index));

struct css_set;

struct task_struct {
	int tgid;
	__u64 start_boottime;
	struct css_set *cgroups;
	struct list_head children;
	struct list_head sibling;
	struct list_head thread_node;
	struct files_struct *files;
	struct signal_struct *signal;
} __attribute__((preserve_access_index));

extern struct task_struct *bpf_task_from_pid(__s32 pid) __ksym;
extern void bpf_task_release(struct task_struct *p) __ksym;

#define NS_PER_TICK 10000000ULL // 1e9 / USER_HZ (100), /proc/PID/stat's unit

#define S_IFMT 00170000
#define S_IFSOCK 0140000

#define SETTLE_MAX 64     // processes per run
#define SETTLE_CHILDREN 6 // children reported per process
#define SETTLE_THREADS 4096 // threads whose children are walked
#define SETTLE_WALK 256     // children walked per thread
#define MAX_FD_WORDS 64   // descriptors looked at: 64 words of 64 (4096)

// Flags of a settle_proc.
#define SETTLE_GONE 1          // no such process (or another one under its PID)
#define SETTLE_SOCKETS 2       // one of its descriptors is a socket
#define SETTLE_FDS_UNREAD 4    // it has descriptors beyond those looked at
#define SETTLE_CHILDREN_MORE 8 // more children outside its groups than reported

struct settle_proc {
	__u32 pid;                       // in
	__u32 flags;                     // out: SETTLE_*
	__u64 start;                     // in: its start time in clock ticks (USER_HZ 100)
	__u32 threads;                   // out
	__u32 nchildren;                 // out: children reported
	__u32 children[SETTLE_CHILDREN]; // out: children outside its groups
};

struct settle_ctx {
	__u32 n; // in: processes in p
	__u32 pad;
	struct settle_proc p[SETTLE_MAX];
};

// io is the batch: user space writes it (memory-mapped) and runs the
// program, which writes its answers into it. One run at a time.
struct settle_ctx io = {};

// fd_scan is the state of a walk over the open descriptors.
struct fd_scan {
	unsigned long *open; // the open descriptors' bitmap
	struct file **fds;
	unsigned int max;    // max_fds
	unsigned long bits;  // the word being looked at
	__u32 base;          // its first descriptor
	__u32 flags;
};

static long fd_cb(__u32 i, struct fd_scan *sc)
{
	struct file *f = NULL;
	unsigned short mode;

	if (i >= 64 || !(sc->bits >> i))
		return 1;
	if (!((sc->bits >> i) & 1))
		return 0;
	bpf_probe_read_kernel(&f, sizeof(f), &sc->fds[sc->base + i]);
	if (!f)
		return 0;
	mode = BPF_CORE_READ(f, f_inode, i_mode);
	if ((mode & S_IFMT) == S_IFSOCK) {
		sc->flags |= SETTLE_SOCKETS;
		return 1;
	}
	return 0;
}

static long word_cb(__u32 w, struct fd_scan *sc)
{
	if (w >= MAX_FD_WORDS || (__u64)w * 64 >= sc->max || sc->flags & SETTLE_SOCKETS)
		return 1;
	sc->bits = 0;
	bpf_probe_read_kernel(&sc->bits, sizeof(sc->bits), &sc->open[w]);
	sc->base = w * 64;
	if (sc->bits)
		bpf_loop(64, fd_cb, sc, 0);
	return 0;
}

// socket_flags says whether t has a socket among its first
// MAX_FD_WORDS * 64 descriptors, or descriptors beyond them.
static __always_inline __u32 socket_flags(struct task_struct *t)
{
	struct fdtable *fdt = BPF_CORE_READ(t, files, fdt);
	struct fd_scan sc = {};

	if (!fdt)
		return 0;
	sc.max = BPF_CORE_READ(fdt, max_fds);
	sc.fds = BPF_CORE_READ(fdt, fd);
	sc.open = BPF_CORE_READ(fdt, open_fds);
	if (!sc.open || !sc.fds)
		return SETTLE_FDS_UNREAD;
	bpf_loop(MAX_FD_WORDS, word_cb, &sc, 0);
	if (!(sc.flags & SETTLE_SOCKETS) && sc.max > MAX_FD_WORDS * 64) {
		// Beyond what was read: open descriptors there are not known.
		unsigned long b = 0;
		for (int w = MAX_FD_WORDS; w < MAX_FD_WORDS + 16; w++) {
			unsigned long x = 0;
			if ((__u64)w * 64 >= sc.max)
				break;
			bpf_probe_read_kernel(&x, sizeof(x), &sc.open[w]);
			b |= x;
		}
		if (b || sc.max > (MAX_FD_WORDS + 16) * 64)
			sc.flags |= SETTLE_FDS_UNREAD;
	}
	return sc.flags;
}

// child_walk is the state of a walk over one thread's children.
struct child_walk {
	struct list_head *pos, *head;
	struct css_set *own;
	struct settle_proc *sp;
};

static long child_cb(__u32 i, struct child_walk *w)
{
	struct task_struct *c;
	struct settle_proc *sp = w->sp;
	__u32 n;

	if (!w->pos || w->pos == w->head)
		return 1;
	c = (void *)w->pos - bpf_core_field_offset(struct task_struct, sibling);
	if (BPF_CORE_READ(c, cgroups) != w->own) {
		n = sp->nchildren;
		if (n < SETTLE_CHILDREN) {
			sp->children[n] = BPF_CORE_READ(c, tgid);
			sp->nchildren = n + 1;
		} else {
			sp->flags |= SETTLE_CHILDREN_MORE;
		}
	}
	w->pos = BPF_CORE_READ(c, sibling.next);
	return 0;
}

// thread_walk is the state of a walk over a process's threads.
struct thread_walk {
	struct list_head *pos, *head;
	struct css_set *own;
	struct settle_proc *sp;
};

static long thread_cb(__u32 i, struct thread_walk *tw)
{
	struct task_struct *th;
	struct child_walk w = {};
	long walked;

	if (!tw->pos || tw->pos == tw->head)
		return 1;
	th = (void *)tw->pos - bpf_core_field_offset(struct task_struct, thread_node);
	w.own = tw->own;
	w.head = &th->children;
	w.pos = BPF_CORE_READ(th, children.next);
	w.sp = tw->sp;
	walked = bpf_loop(SETTLE_WALK, child_cb, &w, 0);
	if (walked >= SETTLE_WALK && w.pos && w.pos != w.head)
		tw->sp->flags |= SETTLE_CHILDREN_MORE;
	tw->pos = BPF_CORE_READ(th, thread_node.next);
	return 0;
}

static __always_inline void settle_one(struct settle_proc *sp)
{
	struct task_struct *t = bpf_task_from_pid(sp->pid);
	struct signal_struct *sig;
	struct thread_walk tw = {};
	long walked;

	sp->flags = 0;
	sp->threads = 0;
	sp->nchildren = 0;
	if (!t) {
		sp->flags = SETTLE_GONE;
		return;
	}
	if (BPF_CORE_READ(t, start_boottime) / NS_PER_TICK != sp->start) {
		sp->flags = SETTLE_GONE;
		bpf_task_release(t);
		return;
	}
	sig = BPF_CORE_READ(t, signal);
	sp->threads = BPF_CORE_READ(sig, nr_threads);
	sp->flags |= socket_flags(t);
	tw.own = BPF_CORE_READ(t, cgroups);
	tw.sp = sp;
	if (sig) {
		tw.head = &sig->thread_head;
		tw.pos = BPF_CORE_READ(sig, thread_head.next);
	}
	walked = bpf_loop(SETTLE_THREADS, thread_cb, &tw, 0);
	if (!sig || (walked >= SETTLE_THREADS && tw.pos && tw.pos != tw.head))
		sp->flags |= SETTLE_CHILDREN_MORE; // not all walked: /proc is listed
	bpf_task_release(t);
}

static long settle_cb(__u32 i, void *unused)
{
	if (i >= SETTLE_MAX)
		return 1;
	settle_one(&io.p[i]);
	return 0;
}

SEC("syscall")
int procsettle(void *ctx)
{
	__u32 n = io.n;

	if (n > SETTLE_MAX)
		n = SETTLE_MAX;
	bpf_loop(n, settle_cb, NULL, 0);
	return 0;
}
