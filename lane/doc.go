// Package lane is lanes' model: named classes of service (lanes) with
// per-resource settings, the rules that put processes into them, and the
// TOML configuration that defines both, with embedded defaults.
//
// It is pure: it parses, validates and matches, and never touches the
// kernel. Enforcers (cpu, disk, netsched) turn its settings into kernel
// state.
package lane
