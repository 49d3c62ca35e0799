package daemon

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/lanes-qos/lanes/events"
)

// appendEventJSON appends e as one line of a stream: the JSON
// encoding/json makes of an events.Event (same fields, payload keys
// sorted), written by hand because a stream encodes every event it sends
// and encoding/json's reflection was half of a stream's CPU time at 10k
// events/s (docs/BENCHMARKS.md). Nested payload values (lists, maps) go
// through encoding/json. TestAppendEventJSON checks both agree.
func appendEventJSON(b []byte, e *events.Event) []byte {
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, e.Seq, 10)
	b = append(b, `,"time":"`...)
	b = e.Time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","source":`...)
	b = appendJSONString(b, e.Source)
	b = append(b, `,"topic":`...)
	b = appendJSONString(b, e.Topic)
	if !e.Deadline.IsZero() {
		b = append(b, `,"deadline":"`...)
		b = e.Deadline.AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	if len(e.Payload) > 0 {
		b = append(b, `,"payload":{`...)
		var small [16]string
		keys := small[:0]
		for k := range e.Payload {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			b = appendJSONValue(b, e.Payload[k])
		}
		b = append(b, '}')
	}
	return append(b, '}', '\n')
}

func appendJSONValue(b []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...)
	case bool:
		return strconv.AppendBool(b, x)
	case int64:
		return strconv.AppendInt(b, x, 10)
	case int:
		return strconv.AppendInt(b, int64(x), 10)
	case uint64:
		return strconv.AppendUint(b, x, 10)
	case float64:
		return appendJSONFloat(b, x)
	case string:
		return appendJSONString(b, x)
	}
	j, err := json.Marshal(v)
	if err != nil {
		// Not encodable (a NaN inside a list): as encoding/json would
		// fail the whole event, say so in its place.
		return append(b, "null"...)
	}
	return append(b, j...)
}

// appendJSONFloat formats f as encoding/json does (ES6 number format).
func appendJSONFloat(b []byte, f float64) []byte {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return append(b, "null"...)
	}
	abs := math.Abs(f)
	fmt := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		fmt = 'e'
	}
	b = strconv.AppendFloat(b, f, fmt, -1, 64)
	if fmt == 'e' {
		// clean up e-09 to e-9
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

const hexDigits = "0123456789abcdef"

// appendJSONString quotes s as encoding/json does, HTML characters
// escaped, invalid UTF-8 replaced by U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
