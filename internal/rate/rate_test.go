package rate

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in      string
		want    uint64
		wantErr string
	}{
		{"20mbit", 20_000_000, ""},
		{"500kbit", 500_000, ""},
		{"1gbit", 1_000_000_000, ""},
		{"100000", 100_000, ""},
		{"2.5mbit", 2_500_000, ""},
		{"20Mbit", 20_000_000, ""},
		{" 8 mbit ", 8_000_000, ""},
		{"1bit", 1, ""},
		{"1tbit", 1_000_000_000_000, ""},
		{"1kbps", 8_000, ""},
		{"1.5mbps", 12_000_000, ""},
		{"1bps", 8, ""},
		{"1Mbps", 8_000_000, ""},
		{"2gbps", 16_000_000_000, ""},
		{"1tbps", 8_000_000_000_000, ""},
		{"8mbs", 0, "unknown unit"},
		{"8mib", 0, "unknown unit"},
		{"8m", 0, "unknown unit"},
		{"2305843009213693952bps", 0, "too large"},
		{"18446744073709551615", 18446744073709551615, ""},
		{"18446744073709551616", 0, "too large"},
		{"0", 0, "must be positive"},
		{"0.0mbit", 0, "must be positive"},
		{"", 0, "want a number and a unit"},
		{"-5mbit", 0, "want a number and a unit"},
		{"mbit", 0, "want a number and a unit"},
		{"1.mbit", 0, "want a number and a unit"},
		{"1e6", 0, "want a number and a unit"},
		{"5 furlongs", 0, "unknown unit"},
		{"1.5bit", 0, "not a whole number"},
		{"0x10", 0, "want a number and a unit"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := Parse(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse(%q) = %d, %v; want error containing %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Parse(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
			if back, err := Parse(Format(got)); err != nil || back != got {
				t.Errorf("Format(%d) = %q does not parse back: %d, %v", got, Format(got), back, err)
			}
		})
	}
}

func TestFormat(t *testing.T) {
	tests := []struct {
		in   uint64
		want string
	}{
		{20_000_000, "20mbit"}, {2_500_000, "2500kbit"}, {1_000_000_000, "1gbit"}, {1234, "1234bit"}, {3_000_000_000_000, "3tbit"},
	}
	for _, tt := range tests {
		if got := Format(tt.in); got != tt.want {
			t.Errorf("Format(%d) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestByteUnitNote(t *testing.T) {
	tests := []struct{ in, want string }{
		{"20Mbps", `"20Mbps" is 20 megabytes per second (bps units count bytes, as in tc), that is 160mbit; write "20mbit" for megabits per second`},
		{"1.5kbps", `"1.5kbps" is 1.5 kilobytes per second (bps units count bytes, as in tc), that is 12kbit; write "1.5kbit" for kilobits per second`},
		{"100bps", `"100bps" is 100 bytes per second (bps units count bytes, as in tc), that is 800bit; write "100bit" for bits per second`},
		{"20mbit", ""},
		{"100000", ""},
		{"20 furlongs", ""},
	}
	for _, tt := range tests {
		if got := ByteUnitNote(tt.in); got != tt.want {
			t.Errorf("ByteUnitNote(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
