package bpf

//go:generate go tool bpf2go -tags linux -cc clang -target bpfel Lanes lanes.c -- -O2 -g -Wall -I/usr/include/x86_64-linux-gnu
