//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package audit

import "os"

// lockDir creates path but takes no lock: on this platform the standard
// library offers no advisory file lock, so two publishers sharing a spool
// directory are not detected.
func lockDir(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
}
