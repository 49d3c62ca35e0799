package lane

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/lanes-qos/lanes/events"
)

// Bridge carries the event channels to and from other hosts over NATS
// ([bridge]; package bridge runs it). The zero URL means no bridge: one
// host needs no NATS.
type Bridge struct {
	// URL is the NATS server, "nats://host:port" (or tls://); "" = off.
	URL string
	// Host is this host's name in subjects (lanes.<host>.<topic>) and in
	// the sources of the events other hosts import from it
	// (host/<host>/<source>): one topic token. Default: the first label of
	// the hostname.
	Host string
	// Export are the topic patterns sent out; Out a CEL filter on them
	// ("" = all). Events imported from another host are never exported.
	Export []string
	Out    string
	// Import are the topic patterns accepted from other hosts; In a CEL
	// filter on them, run with the source already "host/<their host>/...".
	Import []string
	In     string
	// Buffer is how many exported events are held while NATS is
	// unreachable (the oldest make room and are counted as lost).
	Buffer int
	// Credentials is a NATS credentials file (a user JWT and its nkey
	// seed); "" = none.
	Credentials string
}

// Enabled tells whether a bridge is configured.
func (b Bridge) Enabled() bool { return b.URL != "" }

// Equal tells whether two bridge settings are the same (a reload that
// leaves them alone keeps the running bridge and its buffer).
func (b Bridge) Equal(o Bridge) bool {
	return b.URL == o.URL && b.Host == o.Host && slices.Equal(b.Export, o.Export) && b.Out == o.Out &&
		slices.Equal(b.Import, o.Import) && b.In == o.In && b.Buffer == o.Buffer && b.Credentials == o.Credentials
}

func (b Bridge) clone() Bridge {
	b.Export = slices.Clone(b.Export)
	b.Import = slices.Clone(b.Import)
	return b
}

// MaxBridgeBuffer bounds [bridge] buffer.
const MaxBridgeBuffer = 1 << 20

type fileBridge struct {
	URL         *string  `toml:"url"`
	Host        *string  `toml:"host"`
	Export      []string `toml:"export"`
	Out         *string  `toml:"out"`
	Import      []string `toml:"import"`
	In          *string  `toml:"in"`
	Buffer      *int     `toml:"buffer"`
	Credentials *string  `toml:"credentials"`
}

// hostname is os.Hostname, replaced in tests.
var hostname = os.Hostname

func (v *validator) bridge(b *Bridge, fb *fileBridge) {
	if fb != nil {
		if fb.URL != nil {
			b.URL = strings.TrimSpace(*fb.URL)
		}
		if fb.Host != nil {
			b.Host = *fb.Host
		}
		if fb.Export != nil {
			b.Export = slices.Clone(fb.Export)
		}
		if fb.Out != nil {
			b.Out = *fb.Out
		}
		if fb.Import != nil {
			b.Import = slices.Clone(fb.Import)
		}
		if fb.In != nil {
			b.In = *fb.In
		}
		if fb.Buffer != nil {
			b.Buffer = *fb.Buffer
		}
		if fb.Credentials != nil {
			b.Credentials = *fb.Credentials
		}
	}
	if b.URL != "" {
		if err := checkNATSURL(b.URL); err != nil {
			v.add("bridge.url", "%v", err)
		}
	}
	if b.Host == "" && b.URL != "" {
		// Not in the file: the error points at the url that needs it.
		at := func(format string, args ...any) {
			v.errs = append(v.errs, &FieldError{Source: v.source, Line: v.pos.line("bridge.url"), Key: "bridge.host", Msg: fmt.Sprintf(format, args...)})
		}
		h, err := hostname()
		if err != nil {
			at("not set, and the hostname is unknown (%v): name this host", err)
		} else {
			b.Host, _, _ = strings.Cut(h, ".")
			if err := checkHostToken(b.Host); err != nil {
				at("not set, and the hostname %q does not make one (%v): name this host", h, err)
			}
		}
	} else if b.Host != "" {
		if err := checkHostToken(b.Host); err != nil {
			v.add("bridge.host", "%v", err)
		}
	}
	for _, p := range b.Export {
		if err := events.ValidatePattern(p); err != nil {
			v.add("bridge.export", "%v", err)
		}
	}
	for _, p := range b.Import {
		if err := events.ValidatePattern(p); err != nil {
			v.add("bridge.import", "%v", err)
		}
	}
	if b.Out != "" {
		if _, err := events.CompileFilter(b.Out); err != nil {
			v.add("bridge.out", "%v", err)
		}
	}
	if b.In != "" {
		if _, err := events.CompileFilter(b.In); err != nil {
			v.add("bridge.in", "%v", err)
		}
	}
	if b.Buffer < 1 || b.Buffer > MaxBridgeBuffer {
		v.add("bridge.buffer", "%d events: want 1..%d", b.Buffer, MaxBridgeBuffer)
	}
	if b.Credentials != "" && !strings.HasPrefix(b.Credentials, "/") {
		v.add("bridge.credentials", "%q is not an absolute path", b.Credentials)
	}
}

// checkNATSURL checks a NATS server address: nats:// or tls://, a host,
// an optional port.
func checkNATSURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%q is not a URL: %v", s, err)
	}
	if u.Scheme != "nats" && u.Scheme != "tls" {
		return fmt.Errorf("%q: want nats://host:port (or tls://host:port)", s)
	}
	if u.Hostname() == "" {
		return fmt.Errorf("%q has no host", s)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%q: port %q is not 1..65535", s, p)
		}
	}
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q: want nats://host:port, nothing after the port", s)
	}
	if strings.Contains(u.Hostname(), ",") || net.ParseIP(u.Hostname()) == nil && strings.ContainsAny(u.Hostname(), " /") {
		return fmt.Errorf("%q: one server, nats://host:port", s)
	}
	return nil
}

// checkHostToken checks a host name for subjects: one topic token.
func checkHostToken(h string) error {
	if strings.Contains(h, ".") {
		return fmt.Errorf("%q: one token, no dots (it is one token of the subjects lanes.<host>.<topic>)", h)
	}
	if len(h) > 64 {
		return fmt.Errorf("%q: at most 64 bytes", h)
	}
	if err := events.ValidateTopic(h); err != nil {
		return errors.New(strings.Replace(err.Error(), "topic", "host name", 1))
	}
	return nil
}
