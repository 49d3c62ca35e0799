// Package logging is lanesd's leveled, structured log (log/slog): plain
// "time level message key=value" lines on a terminal or a file, and under
// systemd, whose journal stamps each line itself, the message with its
// syslog priority as a "<N>" prefix (sd-daemon(3)), which journald turns
// into the entry's PRIORITY so that `journalctl -p warning` and the
// colours work.
package logging
