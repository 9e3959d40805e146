package pglocal

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
)

// findBinaries locates each named server binary on PATH or, failing that, in
// the newest /usr/lib/postgresql/*/bin (where Debian and Ubuntu put them).
func findBinaries(names ...string) (map[string]string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	found := make(map[string]string, len(names))
	for _, name := range names {
		if p, err := exec.LookPath(name); err == nil {
			found[name] = p
			continue
		}
		for _, dir := range dirs {
			p := filepath.Join(dir, name)
			if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
				found[name] = p
				break
			}
		}
		if found[name] == "" {
			return nil, fmt.Errorf("pglocal: %s not found on PATH or in /usr/lib/postgresql/*/bin; install the PostgreSQL server (e.g. apt-get install postgresql)", name)
		}
	}
	return found, nil
}

// versionOf extracts N from /usr/lib/postgresql/N/bin (0 if not a number).
func versionOf(binDir string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	return v
}

// sysUser is the system user the server runs as; nil means the current user.
type sysUser struct {
	name     string
	uid, gid uint32
}

// serverUser returns the postgres system user when running as root (the
// server refuses to run as root), and nil otherwise.
func serverUser() (*sysUser, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pglocal: running as root, so the server must run as the system user postgres: %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("pglocal: uid of postgres: %w", err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("pglocal: gid of postgres: %w", err)
	}
	return &sysUser{name: u.Username, uid: uint32(uid), gid: uint32(gid)}, nil
}

// sysProcAttr makes a child run as u; a nil u keeps the current user.
func (u *sysUser) sysProcAttr(pdeathsig bool) *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{}
	if pdeathsig {
		attr.Pdeathsig = syscall.SIGKILL
	}
	if u != nil {
		attr.Credential = &syscall.Credential{Uid: u.uid, Gid: u.gid}
	}
	return attr
}

// chown hands dir and everything below it to u; a no-op for a nil u.
func (u *sysUser) chown(dir string) error {
	if u == nil {
		return nil
	}
	err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, int(u.uid), int(u.gid))
	})
	if err != nil {
		return fmt.Errorf("pglocal: chown %s to %s: %w", dir, u.name, err)
	}
	return nil
}

// makeTraversable adds the search (x) bit for others to dir and its parents
// where u could not otherwise reach the data directory below them.
func (u *sysUser) makeTraversable(dir string, logf func(string, ...any)) error {
	if u == nil {
		return nil
	}
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("pglocal: %w", err)
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != u.uid && fi.Mode().Perm()&0o001 == 0 {
			logf("pglocal: adding o+x to %s so that %s can reach the data dir", d, u.name)
			if err := os.Chmod(d, fi.Mode().Perm()|0o001); err != nil {
				return fmt.Errorf("pglocal: make %s traversable for %s: %w", d, u.name, err)
			}
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// traversableTempDir returns os.TempDir() if everybody may traverse it and
// /tmp otherwise, so that a server running as another user reaches its files.
func traversableTempDir() string {
	dir := os.TempDir()
	for d := dir; d != filepath.Dir(d); d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm()&0o001 == 0 {
			return "/tmp"
		}
	}
	return dir
}
