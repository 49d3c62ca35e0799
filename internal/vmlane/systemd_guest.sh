#!/bin/sh
# vmlane systemd guest: run by vmlane-tests.service once the system is up
# (systemd is PID 1, Debian bookworm's own packages). It runs the test
# binaries listed in /etc/vmlane/tests, prints the same markers as
# guest_init.sh for the host's parser, and powers off. The system is set
# up by systemd alone: cgroup v2 and its controllers, bpffs, debugfs,
# sysctls, lo; only the modules the tests need are loaded up front, as
# the busybox guests do (the others autoload).
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TMPDIR=/tmp
export LANES_EMULATED=1 LANES_SYSTEMD_GUEST=1 LANES_DEB=/root/lanes.deb
echo "VMLANE-INFO kernel $(uname -r)"
echo "VMLANE-INFO uptime-at-init $(cut -d' ' -f1 /proc/uptime)"
echo "VMLANE-INFO pid1 $(cat /proc/1/comm)"
echo "VMLANE-INFO systemd $(systemctl --version | head -1)"
echo "VMLANE-INFO system-state $(systemctl is-system-running 2>&1)"
echo "VMLANE-INFO failed-units $(systemctl list-units --failed --plain --no-legend 2>&1 | awk '{print $1}' | tr '\n' ' ')"
echo "VMLANE-INFO own-cgroup $(cat /proc/self/cgroup)"
for m in $(cat /etc/vmlane/modules); do
	modprobe "$m" || echo "VMLANE-INFO modprobe-failed $m"
done
echo "VMLANE-INFO controllers $(cat /sys/fs/cgroup/cgroup.controllers)"
echo "VMLANE-INFO subtree_control $(cat /sys/fs/cgroup/cgroup.subtree_control)"
echo "VMLANE-INFO sched_ext $(test -d /sys/kernel/sched_ext && echo present || echo absent)"
echo "VMLANE-INFO qdisc-default $(cat /proc/sys/net/core/default_qdisc 2>/dev/null)"
echo "VMLANE-INFO mem-total-kb $(awk '/MemTotal/ {print $2}' /proc/meminfo)"
set -- $(cat /etc/vmlane/testargs)
overall=0
while IFS="	" read -r pkg dir bin; do
	[ -n "$pkg" ] || continue
	echo "VMLANE-BEGIN $pkg"
	start=$(cut -d' ' -f1 /proc/uptime)
	(cd "$dir" && "./$bin" -test.v "$@" </dev/null 2>&1)
	rc=$?
	echo
	echo "VMLANE-END $pkg rc=$rc start=$start end=$(cut -d' ' -f1 /proc/uptime)"
	[ "$rc" -eq 0 ] || overall=1
done < /etc/vmlane/tests
if [ -x /usr/local/bin/lanes ]; then
	echo "VMLANE-DOCTOR-BEGIN"
	lanes doctor 2>&1
	rc=$?
	echo
	echo "VMLANE-DOCTOR-END rc=$rc"
	echo "VMLANE-DOCTORJSON-BEGIN"
	lanes doctor --json 2>/dev/null
	echo
	echo "VMLANE-DOCTORJSON-END rc=$?"
fi
echo "VMLANE-INFO mem-used-kb $(awk '/MemTotal/ {t=$2} /MemAvailable/ {a=$2} END {print t-a}' /proc/meminfo)"
echo "VMLANE-INFO uptime-at-end $(cut -d' ' -f1 /proc/uptime)"
echo "VMLANE-RESULT rc=$overall"
sync
# --force: the units are not stopped one by one (nothing here needs it),
# but processes are killed and file systems unmounted before power-off.
systemctl poweroff --force || systemctl poweroff --force --force
