// Package hostcpu says what the host's CPUs are: how many are online
// (what a cap in percent of the host and a reservation's admission refer
// to) and what share of each the kernel lets real-time and deadline
// threads take. The cpu and lane packages read it; it reads sysfs and
// procfs only.
package hostcpu
