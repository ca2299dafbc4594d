package runtime

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The state directory holds the local state of one instance: the Pebble database of its
// persistent stores, its process id (the transactional id under exactly-once), the
// application id it belongs to, and a lock file. An instance claims the directory before it
// does anything else (before it reads metadata or joins the group), so that a second
// instance started on the same directory fails at once with a message that says so,
// instead of failing on the database's own lock after a rebalance of the whole group.

// Names of the files the runtime keeps in the state directory.
const (
	lockFileName  = "kstream.lock"
	appIDFileName = "kstream.application-id"
)

// errDirHeld is returned by lockPath when another instance holds the lock.
var errDirHeld = errors.New("held by another instance")

// stateDirLock is an instance's claim on its state directory, released by release.
type stateDirLock struct {
	dir  string
	f    *os.File
	path string
}

// usesStateDir reports whether the instance keeps anything in its state directory: a
// persistent store, or (under exactly-once) the process id of its transactional id.
func (r *Runtime) usesStateDir() bool {
	if r.cfg.ExactlyOnce {
		return true
	}
	for _, st := range r.topo.SubTopologies {
		for _, s := range st.Stores {
			if s.Persistent {
				return true
			}
		}
	}
	for _, g := range r.topo.GlobalStores {
		if g.Persistent {
			return true
		}
	}
	return false
}

// claimStateDir takes the state directory's lock (creating the directory) if the instance
// uses the directory, and returns nil otherwise. It fails at once if another instance, in
// this process or another, holds the lock. It then makes sure the directory belongs to this
// application: a directory left by another application id is wiped, with a warning, and
// rebuilt from the changelogs.
func (r *Runtime) claimStateDir() (*stateDirLock, error) {
	if !r.usesStateDir() {
		return nil, nil
	}
	l, err := lockStateDir(r.cfg.StateDir)
	if err != nil {
		return nil, err
	}
	if err := r.checkAppID(); err != nil {
		_ = l.release()
		return nil, err
	}
	return l, nil
}

// lockStateDir creates dir if needed and takes its lock file.
func lockStateDir(dir string) (*stateDirLock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("kstream: creating the state directory %s: %w", dir, err)
	}
	path := filepath.Join(dir, lockFileName)
	f, err := lockPath(path)
	if errors.Is(err, errDirHeld) {
		holder := "another instance"
		if b, rerr := os.ReadFile(path); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil && pid > 0 {
				holder = fmt.Sprintf("another instance (pid %d", pid)
				if pid == os.Getpid() {
					holder += ", this process"
				}
				holder += ")"
			}
		}
		return nil, fmt.Errorf("kstream: the state directory %s is in use: %s holds its lock %s; two instances must not share a state directory (give each its own Config.StateDir)", dir, holder, path)
	}
	if err != nil {
		return nil, fmt.Errorf("kstream: locking the state directory %s: %w", dir, err)
	}
	// Who holds the lock, for the message of an instance that finds it taken.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &stateDirLock{dir: dir, f: f, path: path}, nil
}

// release gives the lock up. It is a no-op on a nil lock.
func (l *stateDirLock) release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := unlockPath(l.f, l.path)
	l.f = nil
	if err != nil {
		return fmt.Errorf("kstream: releasing the lock of the state directory %s: %w", l.dir, err)
	}
	return nil
}

// checkAppID compares the application id recorded in the state directory with this
// instance's. A directory of another application is wiped (its stores would otherwise be
// taken for this application's); a directory without a record gets one.
func (r *Runtime) checkAppID() error {
	dir, app := r.cfg.StateDir, r.cfg.ApplicationID
	path := filepath.Join(dir, appIDFileName)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		recorded := strings.TrimSpace(string(b))
		if recorded == app {
			return nil
		}
		r.log.Warn("kstream: the state directory belongs to another application id; wiping it, the stores will be restored from their changelogs",
			"app", app, "state_dir", dir, "recorded_application_id", recorded)
		if err := wipeDir(dir, lockFileName); err != nil {
			return fmt.Errorf("kstream: wiping the state directory %s of application %q: %w", dir, recorded, err)
		}
	case errors.Is(err, os.ErrNotExist):
	default:
		return fmt.Errorf("kstream: reading %s: %w", path, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(app+"\n"), 0o644); err != nil {
		return fmt.Errorf("kstream: writing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("kstream: writing %s: %w", path, err)
	}
	return nil
}

// wipeDir removes everything in dir except the file named keep.
func wipeDir(dir, keep string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.Name() == keep {
			continue
		}
		errs = append(errs, os.RemoveAll(filepath.Join(dir, e.Name())))
	}
	return errors.Join(errs...)
}

// CleanUp deletes the instance's state directory, as Kafka Streams' cleanUp does: every
// store is then restored from its changelog on the next start, and under exactly-once the
// instance gets a new transactional id. It takes the directory's lock first, so it fails if
// another instance (or this one) is running on the directory. The caller makes sure Run is
// not running.
func (r *Runtime) CleanUp() error {
	removed, err := RemoveStateDir(r.cfg.StateDir)
	if err != nil {
		return err
	}
	if removed {
		r.log.Info("kstream: state directory deleted", "app", r.cfg.ApplicationID, "state_dir", r.cfg.StateDir)
	}
	return nil
}

// RemoveStateDir deletes the state directory dir of one instance (its Config.StateDir) as
// CleanUp does, and reports whether there was one. It takes the directory's lock first, so
// it fails, naming the holder, while an instance runs on it. The kstream command's reset
// uses it.
func RemoveStateDir(dir string) (bool, error) {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	l, err := lockStateDir(dir)
	if err != nil {
		return false, fmt.Errorf("kstream: cleaning up: %w", err)
	}
	// Everything but the lock first; then, where the lock is a flock, the lock file and the
	// directory while the lock is still held (lockPath makes sure a lock taken meanwhile is
	// on a file that exists); elsewhere after the release, which removes the lock file.
	err = wipeDir(dir, lockFileName)
	if err == nil && removeWhileLocked {
		err = os.RemoveAll(dir)
	}
	rerr := l.release()
	if err == nil && !removeWhileLocked {
		err = os.RemoveAll(dir)
	}
	if err != nil {
		return false, fmt.Errorf("kstream: cleaning up the state directory %s: %w", dir, err)
	}
	if rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		return true, rerr
	}
	return true, nil
}

// StateDirApplicationID returns the application id recorded in the state directory dir,
// and false when dir holds no record (no instance has used it, or it does not exist).
func StateDirApplicationID(dir string) (string, bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, appIDFileName))
	if errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("kstream: reading the application id of the state directory %s: %w", dir, err)
	}
	return strings.TrimSpace(string(b)), true, nil
}
