// Package pglocal starts and stops PostgreSQL clusters from the server
// binaries installed on the local machine (initdb and postgres).
//
// It is meant for tests and local development: a throwaway cluster lives in a
// fresh temporary directory, runs with durability turned off for speed and is
// removed again by Stop; a persistent cluster keeps its data directory and
// reuses it on the next Start. Both listen on 127.0.0.1 only and trust every
// loopback connection, so never point them at data that matters.
package pglocal

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
)

// Superuser is the name of the superuser created by initdb.
const Superuser = "postgres"

// Options configures Start.
type Options struct {
	// Dir is the data directory. Empty means a fresh temporary directory that
	// Stop removes. A non-empty Dir of a non-persistent cluster must be empty
	// or absent, and Stop removes it too.
	Dir string
	// Port is the TCP port on 127.0.0.1. Zero picks a free port.
	Port int
	// Persistent keeps Dir on Stop and reuses it if it already holds an
	// initialized cluster instead of running initdb again. It requires Dir.
	Persistent bool
	// Disposable runs a persistent cluster as fast as a throwaway one (no fsync)
	// and ties it to this process's life: for tests that stop and restart a
	// cluster on the same data. Its data does not survive a crash.
	Disposable bool
	// Settings are server settings (postgres -c name=value) applied after the
	// defaults above, so they override them: e.g. synchronous_commit=on for a
	// disposable cluster whose commits must wait for a synchronous standby.
	Settings map[string]string
	// StandbyOf, if set, makes the new cluster a streaming standby of that
	// running cluster: its data directory is a base backup of it (pg_basebackup
	// -R, replicating as the superuser) instead of a fresh initdb. See Promote.
	StandbyOf *Cluster
	// Logf, if set, receives progress messages.
	Logf func(format string, args ...any)
}

// Cluster is a running PostgreSQL server started by Start.
type Cluster struct {
	// Dir is the data directory.
	Dir string
	// Port is the TCP port the server listens on at 127.0.0.1.
	Port int

	opts    Options
	runDir  string // temporary directory holding the socket and the server log
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{} // closed when the postmaster has exited
}

// Start initializes (if needed) and starts a cluster and waits until it
// accepts connections. The caller must call Stop.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Persistent && opts.Dir == "" {
		return nil, errors.New("pglocal: a persistent cluster needs Options.Dir")
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	bins, err := findBinaries("initdb", "postgres", "pg_basebackup")
	if err != nil {
		return nil, err
	}
	owner, err := serverUser()
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: opts.Dir, Port: opts.Port, opts: opts}
	if err := c.prepareDirs(owner); err != nil {
		c.removeDirs()
		return nil, err
	}
	create := c.initdb
	if opts.StandbyOf != nil {
		create = c.baseBackup
	}
	if err := create(ctx, bins, owner); err != nil {
		c.removeDirs()
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		err = c.start(ctx, bins["postgres"], owner)
		if err == nil {
			return c, nil
		}
		// A port picked by us may have been taken in the meantime: try another.
		if opts.Port != 0 || attempt == 3 || ctx.Err() != nil {
			c.removeDirs()
			return nil, err
		}
		opts.Logf("pglocal: retrying on another port: %v", err)
	}
}

// URL returns a postgres:// URL for database dbname, connecting over TCP to
// 127.0.0.1 as the superuser without a password.
func (c *Cluster) URL(dbname string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(Superuser),
		Host:     "127.0.0.1:" + strconv.Itoa(c.Port),
		Path:     "/" + dbname,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Stop shuts the server down (fast shutdown), waits for it to exit and
// removes the temporary directories, and the data directory unless the
// cluster is persistent. It is safe to call more than once.
func (c *Cluster) Stop() error {
	err := c.stopServer()
	c.removeDirs()
	return err
}

// prepareDirs creates the data and run directories and hands them to owner.
func (c *Cluster) prepareDirs(owner *sysUser) error {
	runDir, err := os.MkdirTemp(traversableTempDir(), "pglocal-*")
	if err != nil {
		return fmt.Errorf("pglocal: create run dir: %w", err)
	}
	c.runDir = runDir
	c.logPath = filepath.Join(runDir, "postgres.log")
	if c.Dir == "" {
		c.Dir = filepath.Join(runDir, "data")
	}
	if c.Dir, err = filepath.Abs(c.Dir); err != nil {
		return fmt.Errorf("pglocal: data dir: %w", err)
	}
	if !c.opts.Persistent && c.opts.Dir != "" {
		// Stop removes the data dir of a throwaway cluster: never adopt one
		// that holds somebody's files.
		if entries, _ := os.ReadDir(c.Dir); len(entries) > 0 {
			c.Dir = ""
			return fmt.Errorf("pglocal: data dir %s is not empty; use an empty dir or Options.Persistent", c.opts.Dir)
		}
	}
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return fmt.Errorf("pglocal: create data dir: %w", err)
	}
	if err := owner.makeTraversable(filepath.Dir(c.Dir), c.opts.Logf); err != nil {
		return err
	}
	for _, dir := range []string{runDir, c.Dir} {
		if err := owner.chown(dir); err != nil {
			return err
		}
	}
	return nil
}

// removeDirs removes the run directory and, unless persistent, the data dir.
func (c *Cluster) removeDirs() {
	if !c.opts.Persistent && c.Dir != "" {
		_ = os.RemoveAll(c.Dir)
	}
	if c.runDir != "" {
		_ = os.RemoveAll(c.runDir)
	}
}
