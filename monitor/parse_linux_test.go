package monitor

import (
	"encoding/binary"
	"testing"
)

// cnProcMsg builds a proc connector message as the kernel sends it.
func cnProcMsg(seq, ack, what uint32, data ...uint32) []byte {
	b := make([]byte, cnMsgLen+procEventHdr+4*len(data))
	binary.NativeEndian.PutUint32(b[0:], cnIdxProc)
	binary.NativeEndian.PutUint32(b[4:], cnValProc)
	binary.NativeEndian.PutUint32(b[8:], seq)
	binary.NativeEndian.PutUint32(b[12:], ack)
	binary.NativeEndian.PutUint16(b[16:], uint16(procEventHdr+4*len(data)))
	binary.NativeEndian.PutUint32(b[cnMsgLen:], what)
	for i, d := range data {
		binary.NativeEndian.PutUint32(b[cnMsgLen+procEventHdr+4*i:], d)
	}
	return b
}

func TestParseEvent(t *testing.T) {
	tests := []struct {
		name string
		msg  []byte
		want Event
		ok   bool
	}{
		{"fork", cnProcMsg(1, 0, procEventFork, 10, 10, 11, 11), Event{Kind: Fork, ParentPID: 10, ParentTGID: 10, PID: 11, TGID: 11}, true},
		{"thread", cnProcMsg(1, 0, procEventFork, 10, 10, 12, 10), Event{Kind: Fork, ParentPID: 10, ParentTGID: 10, PID: 12, TGID: 10}, true},
		{"exec", cnProcMsg(1, 0, procEventExec, 11, 11), Event{Kind: Exec, PID: 11, TGID: 11}, true},
		{"exit", cnProcMsg(1, 0, procEventExit, 11, 11, 3<<8, 17, 10, 10), Event{Kind: Exit, PID: 11, TGID: 11, ExitCode: 3 << 8, ParentPID: 10, ParentTGID: 10}, true},
		{"exit without parent", cnProcMsg(1, 0, procEventExit, 11, 11, 9), Event{Kind: Exit, PID: 11, TGID: 11, ExitCode: 9}, true},
		{"uid change ignored", cnProcMsg(1, 0, 0x4, 11, 11, 0, 0), Event{}, false},
		{"ack is no event", cnProcMsg(1, 2, procEventNone, 0), Event{}, false},
		{"short fork", cnProcMsg(1, 0, procEventFork, 10, 10), Event{}, false},
		{"truncated", cnProcMsg(1, 0, procEventExec)[:cnMsgLen+4], Event{}, false},
		{"other connector", func() []byte { b := cnProcMsg(1, 0, procEventExec, 1, 1); b[0] = 9; return b }(), Event{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := parseEvent(tt.msg)
			if ok != tt.ok || got != tt.want {
				t.Errorf("parseEvent = %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestParseAck(t *testing.T) {
	tests := []struct {
		name      string
		msg       []byte
		ack, errn uint32
		ok        bool
	}{
		{"success", cnProcMsg(77, 43, procEventNone, 0), 43, 0, true},
		{"EPERM", cnProcMsg(77, 43, procEventNone, 1), 43, 1, true},
		{"event", cnProcMsg(77, 0, procEventExec, 1, 1), 0, 0, false},
		{"short", cnProcMsg(77, 43, procEventNone), 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ack, errn, ok := parseAck(tt.msg)
			if ack != tt.ack || errn != tt.errn || ok != tt.ok {
				t.Errorf("parseAck = %d, %d, %v; want %d, %d, %v", ack, errn, ok, tt.ack, tt.errn, tt.ok)
			}
		})
	}
}
