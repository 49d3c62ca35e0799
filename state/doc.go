// Package state records every kernel object lanes creates or changes (cgroups,
// moved processes with where they came from, controller switches, qdiscs),
// in a SQLite database, so that a clean stop can restore the host as it was
// found and a start after a crash can adopt or remove what a previous run
// left behind.
//
// It knows nothing of cgroups or qdiscs: records are typed keys with JSON
// payloads that the enforcers define.
package state
