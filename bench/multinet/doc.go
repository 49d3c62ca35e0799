// Package multinet is seed 002's Intentional Networking evaluation in
// lanes' testbed (`lanes bench multinet`): two networks between a client
// and a server namespace, each through the link emulator, with the seed's
// synthetic scenarios (Table 2.3), and applications shaped like the
// seed's, run over each way of using the networks: one network alone (the
// lower-latency one, the higher-bandwidth one), MPTCP with the kernel's
// path manager and default scheduler, the intnw multi-socket with every
// message under one label, and the multi-socket with the application's
// labels. It reports the interactive latency and the bulk throughput of
// each, and their ratios to the labelled multi-socket's.
package multinet
