// Package metrics is lanesd's Prometheus endpoint: what each lane
// received (CPU time, throttling, pressure, network bytes, packets and
// drops per direction, disk bytes), what the idletime gates did (holds,
// preemptions, the reaction to foreground as a histogram), and what the
// daemon was asked to do (moves, rule placements, API requests).
//
// Names follow node_exporter's and cAdvisor's: lanes_lane_cpu_usage_seconds_total
// like container_cpu_usage_seconds_total, lanes_lane_pressure_cpu_waiting_seconds_total
// like node_pressure_cpu_waiting_seconds_total, one label per lane
// ("lane") and per interface ("interface"). Lane gauges and counters are
// read from the kernel at scrape time through a Source (the daemon); the
// daemon's own event counters live here and are incremented as things
// happen.
package metrics
