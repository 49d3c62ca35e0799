// Package proxycmd is `lanes proxy`, the client and server ends of
// intproxy, wired into the lanes command by cmd/lanes (like `lanes bench`)
// so that the CLI proper links no network code.
package proxycmd
