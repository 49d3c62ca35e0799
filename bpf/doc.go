// Package bpf holds lanes' kernel programs (C sources built with bpf2go)
// and their generated Go bindings, loaded by netsched: lanes.c (packet
// classification, the network idletime gates, per-socket congestion
// control and marking of TCP sockets), sockmark.c (DSCP LE on UDP
// sockets, cgroup connect/sendmsg), rledbat.c (the receive side of the
// background transport, a TCP iterator); by diskidle: diskidle.c
// (foreground detection on block_bio_queue for the disk idletime gates);
// by ledbat: ledbat.c (lanes' background TCP congestion control, a
// struct_ops tcp_congestion_ops). Only those three packages import it (the
// daemon's side: the CLI and the API types must not link it).
//
// Regenerate with `go generate ./bpf` (needs clang, llvm and libbpf-dev);
// the generated *_bpfel.go and *_bpfel.o files are committed so that a
// build needs Go alone. See lanes.c for the classification precedence.
package bpf
