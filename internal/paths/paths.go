package paths

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/lane"
)

// Defaults.
const (
	// ConfigFile is read when no config is named and it exists.
	ConfigFile = "/etc/lanes/lanes.toml"
	// StateDir holds lanesd's state store (state.db).
	StateDir = "/var/lib/lanes"
	// RunDir holds what lives only while the host is up: lanesd's socket
	// and the state of daemon-less `lanes run`s (tmpfs on most hosts).
	RunDir = "/run/lanes"
	// Socket is where lanesd serves the local API. Its value is the API's
	// (api.DefaultSocket), which programs outside this module see.
	Socket = api.DefaultSocket
)

// LoadConfig returns the config at path; with path empty, the one at
// ConfigFile if that exists, else the embedded defaults. It also returns
// the file actually read ("" for the embedded defaults). A file is also
// checked against this host (lane.Config.CheckHost).
func LoadConfig(path string) (*lane.Config, string, error) {
	if path == "" {
		if _, err := os.Stat(ConfigFile); errors.Is(err, fs.ErrNotExist) {
			return lane.Default(), "", nil
		} else if err != nil {
			return nil, ConfigFile, fmt.Errorf("load config: %w", err)
		}
		path = ConfigFile
	}
	cfg, err := lane.Load(path)
	if err == nil {
		err = cfg.CheckHost()
	}
	if err != nil {
		return nil, path, err
	}
	return cfg, path, nil
}
