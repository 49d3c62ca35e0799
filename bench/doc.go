// Package bench runs lanes' network benchmark scenarios: a scenario file
// (TOML) names a link, workloads with roles (foreground, background,
// interactive) and arms (no lanes, a hand-tuned baseline, lanes); Run
// builds the testbed, runs the reference phases and every arm, interleaved
// and repeated, and writes JSON, a markdown table and an SVG plot of the
// ratios. The lanes CLI's `bench` subcommand calls Run; nothing else in
// lanes imports this package.
package bench
