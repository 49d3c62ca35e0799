package vmlane

import (
	"reflect"
	"testing"
)

func TestParseDoctorJSON(t *testing.T) {
	console := "VMLANE-DOCTOR-BEGIN\nkernel 6.1\nVMLANE-DOCTOR-END rc=0\nVMLANE-DOCTORJSON-BEGIN\r\n" +
		`{"kernel":"6.1.0","mechanisms":[{"resource":"cpu","backend":"cgroup v2 cpu.weight","preferred":true,"reason":"ok","ok":true,"new":1},` + "\r\n" +
		`{"resource":"net egress","backend":"HTB + bfifo","preferred":false,"reason":"no fq_codel","ok":true},` +
		`{"resource":"preemption","backend":"","preferred":false,"reason":"no BPF qdisc","ok":false}]}` + "\r\n\r\nVMLANE-DOCTORJSON-END rc=0\r\n"
	tests := []struct {
		name    string
		text    string
		cells   []string
		wantErr bool
	}{
		{"from the console", ParseConsole(console).DoctorJSON, []string{"cgroup v2 cpu.weight", "HTB + bfifo (fallback)", "MISSING: no BPF qdisc"}, false},
		{"empty", "", nil, false},
		{"garbage", "Error: unknown flag --json", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms, err := ParseDoctorJSON(tt.text)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want error %v", err, tt.wantErr)
			}
			var cells []string
			for _, m := range ms {
				cells = append(cells, m.cell())
			}
			if !reflect.DeepEqual(cells, tt.cells) {
				t.Errorf("cells %q, want %q", cells, tt.cells)
			}
		})
	}
}
