package procwatch

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cilium/ebpf"

	"github.com/lanes-qos/lanes/internal/features"
)

// syscallProg is a BPF syscall program that takes its request and writes
// its answers in its global `io` (the only variable of its .bss, at
// offset 0), memory-mapped: the placement check's and the process
// count's. One run at a time.
type syscallProg struct {
	what string // for errors: "the placement check"
	mu   sync.Mutex
	coll *ebpf.Collection
	prog *ebpf.Program
	io   *ebpf.Memory
	buf  []byte // where a request is encoded and its answers read
}

// loadSyscallProg loads program name of spec with an io of size bytes.
// A kernel without what it needs gives a features.Missing error naming
// need and since.
func loadSyscallProg(what string, spec *ebpf.CollectionSpec, name string, size int, need, since string) (*syscallProg, error) {
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		if errors.Is(err, ebpf.ErrNotSupported) {
			return nil, features.Missing(need, since, err)
		}
		return nil, fmt.Errorf("load %s: %w", what, err)
	}
	bss, prog := coll.Maps[".bss"], coll.Programs[name]
	if bss == nil || prog == nil {
		coll.Close()
		return nil, fmt.Errorf("load %s: no .bss or no program %s in the object", what, name)
	}
	mem, err := bss.Memory()
	if err != nil {
		coll.Close()
		if errors.Is(err, ebpf.ErrNotSupported) {
			return nil, features.Missing("memory-mapped BPF global data", ">= Linux 5.5", err)
		}
		return nil, fmt.Errorf("load %s: %w", what, err)
	}
	if int(mem.Size()) < size {
		coll.Close()
		return nil, fmt.Errorf("load %s: .bss is %d bytes, want %d", what, mem.Size(), size)
	}
	return &syscallProg{what: what, coll: coll, prog: prog, io: mem, buf: make([]byte, size)}, nil
}

// run clears the first n bytes of the buffer, lets encode write the
// request there, runs the program and lets decode read its answers from
// the same bytes.
func (p *syscallProg) run(n int, encode, decode func(b []byte)) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	b := p.buf[:n]
	clear(b)
	encode(b)
	if _, err := p.io.WriteAt(b, 0); err != nil {
		return fmt.Errorf("%s: write the request: %w", p.what, err)
	}
	ret, err := p.prog.Run(&ebpf.RunOptions{})
	if err != nil {
		return fmt.Errorf("%s: run: %w", p.what, err)
	}
	if ret != 0 {
		return fmt.Errorf("%s: the program returned %d", p.what, ret)
	}
	if _, err := p.io.ReadAt(b, 0); err != nil {
		return fmt.Errorf("%s: read the answers: %w", p.what, err)
	}
	decode(b)
	return nil
}

// Close unloads the program.
func (p *syscallProg) Close() error {
	p.coll.Close()
	return nil
}
