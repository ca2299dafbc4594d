//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package runtime

import (
	"errors"
	"os"
)

// removeWhileLocked: an open file cannot be removed on Windows, so CleanUp removes the
// directory after releasing the lock.
const removeWhileLocked = false

// lockPath creates path exclusively (O_EXCL) and keeps it open; it returns errDirHeld if the
// file exists and cannot be removed. A lock file left by a crashed instance is removed
// first: on Windows a file open in another process cannot be removed, so only a stale one
// goes; where removal of an open file succeeds, this fallback detects only an instance of
// this process racing another, which is best effort.
func lockPath(path string) (*os.File, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, errDirHeld
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, os.ErrExist) {
		return nil, errDirHeld
	}
	return f, err
}

// unlockPath closes and removes the lock file.
func unlockPath(f *os.File, path string) error {
	err := f.Close()
	if rerr := os.Remove(path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		err = errors.Join(err, rerr)
	}
	return err
}
