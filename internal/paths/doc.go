// Package paths is where lanes' files are when nothing says otherwise —
// the config file, the state directory, the local API socket — and the one
// way lanesd and the lanes CLI find and load the config (LoadConfig). It
// has no other state; flags and the config's [daemon] keys override these
// defaults.
package paths
