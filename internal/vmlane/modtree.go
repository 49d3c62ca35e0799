package vmlane

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// guestModuleDirs are the parts of a kernel's module tree the systemd
// guest gets, so that the kernel can autoload what tc, ip, BPF and the
// block layer ask for (through kmod's modprobe and depmod's aliases), as
// on an installed system. guestModuleSkip are left out of them: hardware
// drivers that a guest without devices never loads and that would double
// the initramfs. Wanted modules and dependencies outside them are added.
var (
	guestModuleDirs = []string{
		"kernel/net", "kernel/drivers/net", "kernel/drivers/block", "kernel/block",
		"kernel/fs", "kernel/lib", "kernel/crypto", "kernel/arch", "kernel/mm", "kernel/kernel", "kernel/virt",
	}
	guestModuleSkip = []string{
		"kernel/drivers/net/wireless", "kernel/drivers/net/ethernet", "kernel/drivers/net/usb",
		"kernel/drivers/net/can", "kernel/drivers/net/wwan", "kernel/drivers/net/ieee802154",
		"kernel/net/wireless", "kernel/net/mac80211", "kernel/net/bluetooth",
	}
)

// moduleTreeFormat is bumped when the selection changes, so that cached
// trees are rebuilt.
const moduleTreeFormat = 1

// inGuestModuleDirs says whether the module at rel (relative to the
// kernel's modules directory) is in the systemd guest's selection.
func inGuestModuleDirs(rel string) bool {
	rel = filepath.ToSlash(rel)
	under := func(dirs []string) bool {
		for _, d := range dirs {
			if strings.HasPrefix(rel, d+"/") {
				return true
			}
		}
		return false
	}
	return under(guestModuleDirs) && !under(guestModuleSkip)
}

// BuildModuleTree returns a directory holding lib/modules/<release> for
// kernel k as the systemd guest installs it: the selected modules
// decompressed (with their dependencies and the wanted modules), the
// package's modules.builtin*, modules.order, and the indexes the host's
// depmod -b builds. It is cached next to the unpacked kernel, built in a
// temporary directory and renamed when complete; the caller holds the
// cache lock. The report says what became of each wanted module.
func BuildModuleTree(ctx context.Context, k *Kernel, want []string, logf func(string, ...any)) (string, ModuleReport, error) {
	files, builtin, err := scanModules(k)
	if err != nil {
		return "", ModuleReport{}, err
	}
	var rep ModuleReport
	for _, w := range want {
		switch {
		case files[w] != "":
			rep.Loaded = append(rep.Loaded, w)
		case builtin[w]:
			rep.Builtin = append(rep.Builtin, w)
		default:
			rep.Missing = append(rep.Missing, w)
		}
	}
	dir := filepath.Join(filepath.Dir(k.Root), fmt.Sprintf("guest-modules-%d", moduleTreeFormat))
	if _, err := os.Stat(dir); err == nil {
		return dir, rep, nil
	}
	depmod, err := exec.LookPath("depmod")
	if err != nil {
		return "", rep, errors.New("depmod not found: run `lanes-vmlane --install` (apt-get install kmod)")
	}
	t := time.Now()
	tmp, err := os.MkdirTemp(filepath.Dir(k.Root), ".guest-modules-")
	if err != nil {
		return "", rep, fmt.Errorf("module tree: %w", err)
	}
	defer os.RemoveAll(tmp)
	modDir := filepath.Join(tmp, "lib/modules", k.Release)
	queue := append([]string{}, rep.Loaded...)
	for name, rel := range files {
		if inGuestModuleDirs(rel) {
			queue = append(queue, name)
		}
	}
	shipped := map[string]bool{}
	for len(queue) > 0 {
		name := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		if shipped[name] {
			continue
		}
		shipped[name] = true
		rel := files[name]
		plain := filepath.Join(modDir, moduleExt.ReplaceAllString(rel, ".ko"))
		if err := decompressModule(ctx, filepath.Join(k.ModulesDir, rel), plain); err != nil {
			return "", rep, err
		}
		deps, err := moduleDepends(plain)
		if err != nil {
			return "", rep, fmt.Errorf("module %s: %w", name, err)
		}
		for _, d := range deps {
			if files[d] != "" && !shipped[d] {
				queue = append(queue, d)
			}
		}
	}
	for _, f := range []string{"modules.builtin", "modules.builtin.modinfo", "modules.order"} {
		data, err := os.ReadFile(filepath.Join(k.ModulesDir, f))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", rep, fmt.Errorf("module tree: %w", err)
		}
		if err := os.WriteFile(filepath.Join(modDir, f), data, 0o644); err != nil {
			return "", rep, fmt.Errorf("module tree: %w", err)
		}
	}
	if out, err := exec.CommandContext(ctx, depmod, "-b", tmp, k.Release).CombinedOutput(); err != nil {
		return "", rep, fmt.Errorf("depmod -b %s %s: %w: %s", tmp, k.Release, err, lastLines(string(out), 5))
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", rep, fmt.Errorf("module tree: %w", err)
	}
	logf("systemd: %d modules of %s decompressed and indexed by depmod in %.1fs", len(shipped), k.Release, time.Since(t).Seconds())
	return dir, rep, nil
}

// scanModules lists the modules of k by name (path relative to its
// modules directory) and the names built in.
func scanModules(k *Kernel) (files map[string]string, builtin map[string]bool, err error) {
	files = map[string]string{}
	err = filepath.WalkDir(filepath.Join(k.ModulesDir, "kernel"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && moduleExt.MatchString(p) {
			rel, _ := filepath.Rel(k.ModulesDir, p)
			files[modName(p)] = rel
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("modules of %s: %w", k.Release, err)
	}
	builtin = map[string]bool{}
	if data, err := os.ReadFile(filepath.Join(k.ModulesDir, "modules.builtin")); err == nil {
		for _, l := range strings.Fields(string(data)) {
			builtin[modName(l)] = true
		}
	}
	return files, builtin, nil
}
