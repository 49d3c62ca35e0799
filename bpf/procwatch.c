//go:build ignore

// lanes_procwatch: process events for lanesd's rule placement (package
// procwatch), carrying what the placer would otherwise read from /proc.
//
// - procwatch_exec (tp_btf/sched_process_exec) posts an exec record: the
//   process's PID, start time, command name, real uid and its cgroups (the
//   v2 group and the groups of the cpu and io controllers, as kernfs ids,
//   which are the inode numbers of their directories), and keeps what file
//   it executed in exe_ids until it exits.
// - procwatch_exit (tp_btf/sched_process_exit) posts an exit record when
//   the last thread of a process exits (signal->live reached zero before
//   the tracepoint).
// - procwatch_newproc (tp_btf/sched_process_fork) posts a fork record of a
//   new process (not a thread) while user space sets want_forks.
//
// Records are posted without waking the reader; the first record after a
// quiet spell arms a timer (wake) that posts a wake-up record
// wake_delay_ns later, and while records keep coming the reader reads on
// a timer of its own (polling) and none is armed: the reader is woken at
// most once per delay, however many processes start and end, and never
// at the moment one does (a reader woken then runs beside the process's parent, which in a
// shell loop is about to send the packet lanesd's idletime gate must hold
// against within a fraction of a millisecond).
//
// What a process started after its exec (threads, children, sockets) is
// checked after its move by bpf/procsettle.c.

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

char __license[] SEC("license") = "GPL";

// Kernel types, only the members used; CO-RE relocates them against the
// running kernel's BTF.
struct kernfs_node {
	__u64 id;
} __attribute__((preserve_access_index));

struct cgroup {
	struct kernfs_node *kn;
} __attribute__((preserve_access_index));

struct cgroup_subsys_state {
	struct cgroup *cgroup;
} __attribute__((preserve_access_index));

struct css_set {
	struct cgroup_subsys_state *subsys[32];
	struct cgroup *dfl_cgrp;
} __attribute__((preserve_access_index));

enum cgroup_subsys_id {
	cpu_cgrp_id = 1,
	io_cgrp_id = 3,
};

typedef struct {
	int counter;
} atomic_t;

struct signal_struct {
	atomic_t live;
} __attribute__((preserve_access_index));

struct kuid {
	__u32 val;
};

struct cred {
	struct kuid uid;
} __attribute__((preserve_access_index));

struct inode {
	unsigned long i_ino;
} __attribute__((preserve_access_index));

struct vfsmount;
struct dentry;

struct path {
	struct vfsmount *mnt;
	struct dentry *dentry;
} __attribute__((preserve_access_index));

struct file {
	struct path f_path;
	struct inode *f_inode;
} __attribute__((preserve_access_index));

struct linux_binprm {
	struct file *file;
} __attribute__((preserve_access_index));

struct task_struct {
	int pid;
	int tgid;
	__u64 start_boottime;
	char comm[16];
	struct task_struct *group_leader;
	struct task_struct *real_parent;
	const struct cred *real_cred;
	struct css_set *cgroups;
	struct signal_struct *signal;
} __attribute__((preserve_access_index));

// Record kinds.
#define PW_EXEC 1
#define PW_EXIT 2
#define PW_FORK 3
#define PW_WAKE 4 // no process: the timer's wake-up

#define CLOCK_MONOTONIC 1

// pw_event is one record in `events`.
struct pw_event {
	__u32 kind;
	__u32 pid;      // the process (thread group) id
	__u32 ppid;     // fork, exit: the parent process; exec: 0
	__u32 uid;      // exec: the real uid
	__u64 start_ns; // the process's start, ns since boot (/proc/PID/stat's starttime in ns)
	__u64 cg_v2;    // exec: kernfs id of its v2 group
	__u64 cg_cpu;   // exec: of its group in the hierarchy of the cpu controller
	__u64 cg_io;    // exec: of the io (blkio) controller
	char comm[16];  // exec: the command name
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 21);
} events SEC(".maps");

// exe_id names the file a process executed: its mount and dentry (as
// opaque numbers) and inode. The same exe_id has the same path (the
// dentry's, in that mount) unless the file or a directory above it is
// renamed meanwhile; user space keeps the paths it read for a second.
struct exe_id {
	__u64 start_ns; // the process's start, against a reused PID
	__u64 mnt;
	__u64 dentry;
	__u64 ino;
};

// exe_ids: by process id, from its exec to its exit; LRU, so that the
// processes of the host that lanes never asks about make room.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 32768);
	__type(key, __u32);
	__type(value, struct exe_id);
} exe_ids SEC(".maps");

// Exported to Go (bpf2go -type pw_event).
const struct pw_event *unused_pw_event __attribute__((unused));
const struct exe_id *unused_exe_id __attribute__((unused));

// wake holds the timer of the coalesced wake-ups.
struct wake_timer {
	struct bpf_timer t;
	__u32 armed; // a wake-up is due
	__u32 ready; // the timer is initialised
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct wake_timer);
} wake SEC(".maps");

// wake_delay_ns is how long after the first record of a spell the reader
// is woken (user space may change it before loading).
volatile const __u64 wake_delay_ns = 1000000;

// polling: user space sets it while it reads the ring on a timer of its
// own (a storm), so that no wake-up is armed then.
volatile __u32 polling = 0;

// want_forks: user space sets it while someone reads fork records.
volatile __u32 want_forks = 0;

// lost counts records the ring buffer had no room for; user space treats
// a rise like the proc connector's overflow (rescan /proc).
volatile __u64 lost = 0;

static int wake_cb(void *map, __u32 *key, struct wake_timer *w)
{
	struct pw_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	// Cleared before the record: a record posted meanwhile arms a next
	// wake-up rather than being left unannounced.
	w->armed = 0;
	if (!e) {
		// The ring is full: the reader is behind and reads on.
		return 0;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->kind = PW_WAKE;
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
	return 0;
}

// post submits e without a wake-up and arms the timer if none is due.
static __always_inline void post(struct pw_event *e)
{
	__u32 zero = 0;
	struct wake_timer *w;

	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
	if (polling)
		return;
	w = bpf_map_lookup_elem(&wake, &zero);
	if (!w || __sync_val_compare_and_swap(&w->armed, 0, 1) != 0)
		return;
	if (!w->ready) {
		// Once; a second init (a race) fails with -EBUSY, harmlessly.
		bpf_timer_init(&w->t, &wake, CLOCK_MONOTONIC);
		bpf_timer_set_callback(&w->t, wake_cb);
		w->ready = 1;
	}
	if (bpf_timer_start(&w->t, wake_delay_ns, 0) != 0)
		w->armed = 0;
}

static __always_inline __u64 cg_id(struct cgroup *cg)
{
	if (!cg)
		return 0;
	return BPF_CORE_READ(cg, kn, id);
}

static __always_inline __u64 css_cg_id(struct css_set *cs, int idx)
{
	struct cgroup_subsys_state *css = NULL;

	if (idx < 0 || idx >= 32)
		return 0;
	bpf_core_read(&css, sizeof(css), &cs->subsys[idx]);
	if (!css)
		return 0;
	return cg_id(BPF_CORE_READ(css, cgroup));
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(procwatch_exec, struct task_struct *p, int old_pid, struct linux_binprm *bprm)
{
	struct exe_id id = {};
	struct pw_event *e;
	struct css_set *cs;
	__u32 tgid = BPF_CORE_READ(p, tgid);

	id.start_ns = BPF_CORE_READ(p, group_leader, start_boottime);
	id.mnt = (__u64)BPF_CORE_READ(bprm, file, f_path.mnt);
	id.dentry = (__u64)BPF_CORE_READ(bprm, file, f_path.dentry);
	id.ino = BPF_CORE_READ(bprm, file, f_inode, i_ino);
	bpf_map_update_elem(&exe_ids, &tgid, &id, BPF_ANY);

	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		__sync_fetch_and_add(&lost, 1);
		return 0;
	}
	e->kind = PW_EXEC;
	e->pid = tgid;
	e->ppid = 0;
	e->uid = BPF_CORE_READ(p, real_cred, uid.val);
	// After the exec the task leads its group, with the group's start.
	e->start_ns = BPF_CORE_READ(p, group_leader, start_boottime);
	cs = BPF_CORE_READ(p, cgroups);
	e->cg_v2 = cg_id(BPF_CORE_READ(cs, dfl_cgrp));
	e->cg_cpu = 0;
	e->cg_io = 0;
	if (bpf_core_enum_value_exists(enum cgroup_subsys_id, cpu_cgrp_id))
		e->cg_cpu = css_cg_id(cs, bpf_core_enum_value(enum cgroup_subsys_id, cpu_cgrp_id));
	if (bpf_core_enum_value_exists(enum cgroup_subsys_id, io_cgrp_id))
		e->cg_io = css_cg_id(cs, bpf_core_enum_value(enum cgroup_subsys_id, io_cgrp_id));
	BPF_CORE_READ_STR_INTO(&e->comm, p, comm);
	post(e);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(procwatch_exit, struct task_struct *p)
{
	struct pw_event *e;
	__u32 tgid;

	if (BPF_CORE_READ(p, signal, live.counter) != 0)
		return 0; // other threads of the process live on
	tgid = BPF_CORE_READ(p, tgid);
	// (The key on the stack: before 6.2 or so the verifier takes no map
	// key in ring buffer memory.)
	bpf_map_delete_elem(&exe_ids, &tgid);
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		__sync_fetch_and_add(&lost, 1);
		return 0;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->kind = PW_EXIT;
	e->pid = tgid;
	e->ppid = BPF_CORE_READ(p, real_parent, tgid);
	e->start_ns = BPF_CORE_READ(p, group_leader, start_boottime);
	post(e);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(procwatch_newproc, struct task_struct *parent, struct task_struct *child)
{
	struct pw_event *e;
	__u32 tgid, ptgid;

	if (!want_forks)
		return 0;
	tgid = BPF_CORE_READ(child, tgid);
	ptgid = BPF_CORE_READ(parent, tgid);
	if (tgid == ptgid)
		return 0; // a thread
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		__sync_fetch_and_add(&lost, 1);
		return 0;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->kind = PW_FORK;
	e->pid = tgid;
	e->ppid = ptgid;
	e->start_ns = BPF_CORE_READ(child, start_boottime);
	post(e);
	return 0;
}
