package bpf

//go:generate go tool bpf2go -tags linux -cc clang -target bpfel -type idle_gate Lanes lanes.c -- -O2 -g -Wall -mcpu=v3 -I/usr/include/x86_64-linux-gnu
