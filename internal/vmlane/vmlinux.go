package vmlane

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
)

// payloadDecompressor returns the command that decompresses a bzImage
// payload by its magic, and whether the payload carries the 4-byte
// uncompressed size the x86 build appends (every format but gzip).
func payloadDecompressor(payload []byte) (cmd []string, sized bool, err error) {
	switch {
	case bytes.HasPrefix(payload, []byte{0x1f, 0x8b}):
		return []string{"gzip", "-dc"}, false, nil
	case bytes.HasPrefix(payload, []byte{0xfd, '7', 'z', 'X', 'Z', 0}):
		return []string{"xz", "-dc", "--single-stream"}, true, nil
	case bytes.HasPrefix(payload, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		return []string{"zstd", "-dcq"}, true, nil
	case bytes.HasPrefix(payload, []byte{0x5d, 0, 0}):
		return []string{"xz", "-dc", "--format=lzma"}, true, nil
	}
	if len(payload) > 6 {
		payload = payload[:6]
	}
	return nil, false, fmt.Errorf("unknown bzImage payload compression (magic % x)", payload)
}

// bzImagePayload returns the compressed kernel inside a bzImage, located
// by the setup header's payload_offset and payload_length.
func bzImagePayload(img []byte) ([]byte, error) {
	if len(img) < 0x250 || string(img[0x202:0x206]) != "HdrS" {
		return nil, errors.New("not a bzImage (no HdrS setup header)")
	}
	setupSects := int(img[0x1f1])
	if setupSects == 0 {
		setupSects = 4
	}
	pm := (setupSects + 1) * 512
	off := int(binary.LittleEndian.Uint32(img[0x248:]))
	n := int(binary.LittleEndian.Uint32(img[0x24c:]))
	if pm+off+n > len(img) || n == 0 {
		return nil, fmt.Errorf("bzImage payload out of range (offset %d length %d size %d)", pm+off, n, len(img))
	}
	return img[pm+off : pm+off+n], nil
}

// ExtractVmlinux writes the uncompressed kernel ELF inside bzImage to
// out, for QEMU's PVH boot (which skips the decompressor, ~2.5 s under
// emulation). It checks that the result is an ELF with a PVH entry note.
func ExtractVmlinux(ctx context.Context, bzImage, out string) error {
	img, err := os.ReadFile(bzImage)
	if err != nil {
		return fmt.Errorf("extract vmlinux: %w", err)
	}
	payload, err := bzImagePayload(img)
	if err != nil {
		return fmt.Errorf("extract vmlinux from %s: %w", bzImage, err)
	}
	argv, sized, err := payloadDecompressor(payload)
	if err != nil {
		return fmt.Errorf("extract vmlinux from %s: %w", bzImage, err)
	}
	if sized && len(payload) > 4 {
		payload = payload[:len(payload)-4]
	}
	tmp := out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("extract vmlinux: %w", err)
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(payload), f, &stderr
	runErr := cmd.Run()
	if err := f.Close(); err != nil && runErr == nil {
		runErr = err
	}
	if runErr != nil {
		os.Remove(tmp)
		return fmt.Errorf("extract vmlinux: %s: %w: %s", argv[0], runErr, stderr.String())
	}
	if err := checkPVH(tmp); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("extract vmlinux from %s: %w", bzImage, err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("extract vmlinux: %w", err)
	}
	return nil
}

// checkPVH verifies that path is an ELF kernel with the Xen PVH entry
// note (XEN_ELFNOTE_PHYS32_ENTRY = 18), which QEMU needs to boot it.
func checkPVH(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("not an ELF kernel: %w", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type != elf.PT_NOTE {
			continue
		}
		data := make([]byte, p.Filesz)
		if _, err := p.ReadAt(data, 0); err != nil {
			return fmt.Errorf("read ELF notes: %w", err)
		}
		for len(data) >= 12 {
			nameSz := binary.LittleEndian.Uint32(data[0:])
			descSz := binary.LittleEndian.Uint32(data[4:])
			typ := binary.LittleEndian.Uint32(data[8:])
			nameEnd := 12 + int((nameSz+3)&^3)
			end := nameEnd + int((descSz+3)&^3)
			if end > len(data) {
				break
			}
			if typ == 18 && bytes.HasPrefix(data[12:], []byte("Xen")) {
				return nil
			}
			data = data[end:]
		}
	}
	return errors.New("kernel has no PVH entry note (CONFIG_PVH unset?)")
}
