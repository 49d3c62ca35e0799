// Package bpf holds lanes' kernel programs for packet classification (C
// sources built with bpf2go) and their generated Go bindings. Only netsched
// loads them; nothing else imports this package.
//
// Regenerate with `go generate ./bpf` (needs clang, llvm and libbpf-dev);
// the generated *_bpfel.go and *_bpfel.o files are committed so that a
// build needs Go alone. See lanes.c for the classification precedence.
package bpf
