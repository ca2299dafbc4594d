//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package runtime

import (
	"errors"
	"os"
	"syscall"
)

// removeWhileLocked: the lock file may be removed while its flock is held.
const removeWhileLocked = true

// lockPath opens path (creating it) and takes an exclusive flock on it without waiting; it
// returns errDirHeld if another open file (of this process or another) holds it. The lock
// goes with the process: a crashed instance leaves no stale lock behind.
//
// If path was removed or replaced between opening and locking (CleanUp deletes the
// directory while it holds the lock), the lock is on a file nobody else will open: it is
// taken again on the file that path names now.
func lockPath(path string) (*os.File, error) {
	for attempt := 0; ; attempt++ {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			_ = f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) || errors.Is(err, syscall.EAGAIN) {
				return nil, errDirHeld
			}
			return nil, err
		}
		fi, ferr := f.Stat()
		pi, perr := os.Stat(path)
		if ferr == nil && perr == nil && os.SameFile(fi, pi) {
			return f, nil
		}
		_ = f.Close()
		if attempt >= 10 {
			return nil, errors.Join(errors.New("the lock file keeps being replaced"), ferr, perr)
		}
	}
}

// unlockPath releases the lock taken by lockPath. The file stays, with the pid of its last
// holder.
func unlockPath(f *os.File, _ string) error {
	return f.Close() // closing the only descriptor releases the flock
}
