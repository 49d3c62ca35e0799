package paths

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lanes-qos/lanes/lane"
)

// The embedded config's [daemon] defaults are these paths.
func TestEmbeddedDefaultsAgree(t *testing.T) {
	d := lane.Default().Daemon
	if filepath.Dir(Socket) != RunDir {
		t.Errorf("socket %s is not in the run directory %s", Socket, RunDir)
	}
	if d.Socket != Socket || d.StateDir != StateDir {
		t.Errorf("lane's default.toml says socket %q, state_dir %q; package paths says %q, %q", d.Socket, d.StateDir, Socket, StateDir)
	}
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.toml")
	bad := filepath.Join(dir, "bad.toml")
	os.WriteFile(good, []byte("[lanes.video]\ncpu.weight = 300\n"), 0o644)
	os.WriteFile(bad, []byte("[lanes.video]\ncpu.weight = -3\n"), 0o644)
	_, statErr := os.Stat(ConfigFile)
	for _, tc := range []struct {
		name, path, wantPath, wantErr string
		wantLane                      string
	}{
		{name: "named file", path: good, wantPath: good, wantLane: "video"},
		{name: "invalid file names file, line and key", path: bad, wantPath: bad, wantErr: bad + ":2: lanes.video.cpu.weight"},
		{name: "missing file", path: filepath.Join(dir, "none.toml"), wantPath: filepath.Join(dir, "none.toml"), wantErr: "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, path, err := LoadConfig(tc.path)
			if path != tc.wantPath {
				t.Errorf("path %q, want %q", path, tc.wantPath)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cfg.Lane(tc.wantLane); err != nil {
				t.Error(err)
			}
		})
	}
	t.Run("no name", func(t *testing.T) {
		cfg, path, err := LoadConfig("")
		switch {
		case os.IsNotExist(statErr):
			if err != nil || path != "" || cfg.Source != lane.EmbeddedSource {
				t.Errorf("without %s: got path %q, source %q, error %v; want the embedded defaults", ConfigFile, path, cfg.Source, err)
			}
		case path != ConfigFile:
			t.Errorf("with %s present: read %q (error %v)", ConfigFile, path, err)
		}
	})
}
