package scripts

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/terdut-server/terdut-server/test/harness/proctest"
)

// devCheckout copies scripts/devdb.sh into a checkout at root/repo and returns the copy's
// path; the cluster it starts lives under root/repo/.dev and is stopped when the test ends.
func devCheckout(t *testing.T, root string) (script string, env []string) {
	t.Helper()
	src, err := os.ReadFile("devdb.sh")
	if err != nil {
		t.Fatal(err)
	}
	script = filepath.Join(root, "repo", "scripts", "devdb.sh")
	if err := os.MkdirAll(filepath.Dir(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, src, 0o755); err != nil {
		t.Fatal(err)
	}
	ports, err := proctest.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	env = append(os.Environ(), "TERDUT_DEV_PG_PORT="+strconv.Itoa(ports[0]))
	t.Cleanup(func() {
		cmd := exec.Command(script, "stop")
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Logf("devdb.sh stop: %v\n%s", err, out)
		}
	})
	return script, env
}

func runDevDB(t *testing.T, script string, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(script, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// openTempDir is a temporary directory that every user may search, through its parents
// (go test makes them 700): the test's own, opened by the test.
func openTempDir(t *testing.T) string {
	t.Helper()
	base := t.TempDir()
	for _, d := range []string{base, filepath.Dir(base)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return base
}

func asRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("scripts/devdb.sh's root path is what this tests: run it as root (CI does)")
	}
}

// TestDevDB_TouchesNothingOutsideDev: as root, devdb.sh opens no directory outside .dev: it
// used to run chmod o+x on every parent of the checkout that the postgres user could not
// search (/root included) and leave it so. Where postgres cannot reach the checkout, the
// cluster lives in a private directory of postgres's instead (under $TERDUT_DEV_PG_OUTSIDE,
// /var/tmp by default), recorded in .dev, and `make run` still gets a working database.
func TestDevDB_TouchesNothingOutsideDev(t *testing.T) {
	asRoot(t)
	home, outside, script, env := closedCheckout(t)
	if out, err := runDevDB(t, script, env, "start"); err != nil {
		t.Fatalf("start behind a parent closed to postgres: %v\n%s", err, out)
	}
	fi, serr := os.Stat(home)
	if serr != nil {
		t.Fatal(serr)
	}
	if mode := fi.Mode().Perm(); mode != 0o700 {
		t.Errorf("the checkout's parent: got mode %o after devdb.sh start, want 700 as it was", mode)
	}
	recorded, err := os.ReadFile(filepath.Join(home, "repo", ".dev", "cluster-dir"))
	if err != nil || !strings.HasPrefix(string(recorded), outside+"/terdut-devdb-") {
		t.Fatalf("the cluster's directory: got %q, %v, want one under %s recorded in .dev", recorded, err, outside)
	}
	dir := strings.TrimSpace(string(recorded))
	if st, err := os.Lstat(dir); err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
		t.Errorf("the cluster's directory %s: got %v, %v, want a directory of mode 700", dir, st, err)
	}
	url, err := runDevDB(t, script, env, "url", "--password")
	if err != nil {
		t.Fatal(err)
	}
	if q, err := exec.Command("psql", "-X", "-tAc", "SELECT 1", strings.TrimSpace(url)).CombinedOutput(); err != nil || strings.TrimSpace(string(q)) != "1" {
		t.Errorf("the printed URL: got %q, %v, want a database that answers", q, err)
	}
}

// closedCheckout is a checkout behind a parent closed to postgres (as /root is), whose cluster
// goes under a directory of the test's own ($TERDUT_DEV_PG_OUTSIDE); it returns the parent
// too.
func closedCheckout(t *testing.T) (home, outside, script string, env []string) {
	t.Helper()
	home = filepath.Join(openTempDir(t), "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	outside = shortTempDir(t)
	script, env = devCheckout(t, home)
	return home, outside, script, append(env, "TERDUT_DEV_PG_OUTSIDE="+outside)
}

// shortTempDir is a directory every user may enter, with a short path: a Unix socket's path
// holds at most 107 bytes, and t.TempDir's are long.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "devdb-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o1777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestDevDB_RefusesAForeignClusterDir: the directory outside .dev is made by devdb.sh, private
// to postgres; one that is already there and is not that (another user's, a link) is refused.
func TestDevDB_RefusesAForeignClusterDir(t *testing.T) {
	asRoot(t)
	home, outside, script, env := closedCheckout(t)
	repo, _ := filepath.Abs(filepath.Join(home, "repo"))
	sum := sha256.Sum256([]byte(repo))
	planted := filepath.Join(outside, "terdut-devdb-"+hex.EncodeToString(sum[:])[:16])
	if err := os.Symlink(t.TempDir(), planted); err != nil {
		t.Fatal(err)
	}
	out, err := runDevDB(t, script, env, "start")
	if err == nil || !strings.Contains(out, "not a private directory of postgres") {
		t.Fatalf("start with a link planted where the cluster would go: got %v, want refused; output:\n%s", err, out)
	}
}

// TestDevDB_NoSuperuserForEveryone: the development cluster does not trust every local
// connection as its superuser: another local user, over TCP on loopback or the socket, gets
// nowhere without the password kept in .dev; the URL that `url` prints works.
func TestDevDB_NoSuperuserForEveryone(t *testing.T) {
	asRoot(t)
	base := openTempDir(t)
	script, env := devCheckout(t, base)
	if out, err := runDevDB(t, script, env, "start"); err != nil {
		t.Fatalf("devdb.sh start: %v\n%s", err, out)
	}
	url, err := runDevDB(t, script, env, "url", "--password")
	if err != nil {
		t.Fatal(err)
	}
	url = strings.TrimSpace(url)
	psql, err := exec.LookPath("psql")
	if err != nil {
		t.Fatal(err)
	}
	port := strings.TrimPrefix(env[len(env)-1], "TERDUT_DEV_PG_PORT=")
	run := filepath.Join(base, "repo", ".dev", "run")
	refused := func(when string) {
		t.Helper()
		for _, host := range []string{"127.0.0.1", run} {
			cmd := exec.Command("runuser", "-u", "nobody", "--", psql, "-X", "-w", "-h", host, "-p", port, "-U", "postgres",
				"-d", "terdut", "-tAc", "SELECT current_user")
			cmd.Env = append(os.Environ(), "PGPASSWORD=", "PGPASSFILE=/nonexistent")
			if out, err := cmd.CombinedOutput(); err == nil {
				t.Errorf("%s: another local user at %s as postgres, with no password: got in (%s), want refused",
					when, host, strings.TrimSpace(string(out)))
			}
		}
	}
	refused("a new cluster")
	// A cluster of an earlier devdb.sh trusted every local connection: the next start closes it.
	hba := filepath.Join(base, "repo", ".dev", "pgdata", "pg_hba.conf")
	conf, err := os.ReadFile(hba)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hba, []byte(strings.ReplaceAll(string(conf), "scram-sha-256", "trust")), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := runDevDB(t, script, env, "stop"); err != nil {
		t.Fatalf("devdb.sh stop: %v\n%s", err, out)
	}
	if out, err := runDevDB(t, script, env, "start"); err != nil {
		t.Fatalf("devdb.sh start over a trusting cluster: %v\n%s", err, out)
	}
	refused("an earlier cluster, started again")
	if out, err := exec.Command(psql, "-X", "-w", url, "-tAc", "SELECT 1").CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "1" {
		t.Errorf("psql with the URL devdb.sh url prints: got %v %s, want 1", err, out)
	}
}

// TestDevDB_RootWritesNothingPostgresCanRedirect: root never writes into a directory the
// postgres user owns, where a link planted by whoever runs as postgres would send the write
// (and a chown after it) anywhere: the password file initdb reads is written by postgres itself.
func TestDevDB_RootWritesNothingPostgresCanRedirect(t *testing.T) {
	asRoot(t)
	base := openTempDir(t)
	script, env := devCheckout(t, base)
	if out, err := runDevDB(t, script, env, "start"); err != nil {
		t.Fatalf("start: %v\n%s", err, out)
	}
	if out, err := runDevDB(t, script, env, "stop"); err != nil {
		t.Fatalf("stop: %v\n%s", err, out)
	}
	// What the postgres user can do to its own directories: make the next start initialize
	// again, with the password file a link to a file of root's.
	dev := filepath.Join(base, "repo", ".dev")
	victim := filepath.Join(t.TempDir(), "root-only")
	if err := os.WriteFile(victim, []byte("root's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][]string{{"rm", "-f", filepath.Join(dev, "pgdata", "PG_VERSION")}, {"ln", "-s", victim, filepath.Join(dev, "run", "pwfile")}} {
		if out, err := exec.Command("runuser", append([]string{"-u", "postgres", "--"}, c...)...).CombinedOutput(); err != nil {
			t.Fatalf("as postgres, %v: %v\n%s", c, err, out)
		}
	}
	out, _ := runDevDB(t, script, env, "start")
	b, err := os.ReadFile(victim)
	st, serr := os.Stat(victim)
	if err != nil || serr != nil || string(b) != "root's\n" || st.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Fatalf("root's file through postgres's link: got %q (%v, %v), want it untouched and root's; output:\n%s", b, err, serr, out)
	}
}

// TestDevDB_RootActsThroughNoLinkOfPostgres: where the cluster lives outside .dev, its
// directory is postgres's, and so is whatever is in it: whoever runs as postgres can put a
// link in place of the cluster's directories or of the server's log. As root, devdb.sh acts
// on none of them: it used to chmod 700 whatever a link in place of pgdata named (any
// directory, /etc included) and, when the server did not start, print the tail of whatever
// file a link in place of run/postgres.log named (a file only root may read).
func TestDevDB_RootActsThroughNoLinkOfPostgres(t *testing.T) {
	asRoot(t)
	asPostgres := func(c ...string) {
		t.Helper()
		if out, err := exec.Command("runuser", append([]string{"-u", "postgres", "--"}, c...)...).CombinedOutput(); err != nil {
			t.Fatalf("as postgres, %v: %v\n%s", c, err, out)
		}
	}
	t.Run("ClusterDirLink", func(t *testing.T) {
		home, _, script, env := closedCheckout(t)
		if out, err := runDevDB(t, script, env, "start"); err != nil {
			t.Fatalf("start: %v\n%s", err, out)
		}
		if out, err := runDevDB(t, script, env, "stop"); err != nil {
			t.Fatalf("stop: %v\n%s", err, out)
		}
		recorded, err := os.ReadFile(filepath.Join(home, "repo", ".dev", "cluster-dir"))
		if err != nil {
			t.Fatal(err)
		}
		dir := strings.TrimSpace(string(recorded))
		victim := filepath.Join(openTempDir(t), "a-directory-of-roots")
		if err := os.Mkdir(victim, 0o755); err != nil {
			t.Fatal(err)
		}
		asPostgres("mv", filepath.Join(dir, "pgdata"), filepath.Join(dir, "pgdata.moved"))
		asPostgres("ln", "-s", victim, filepath.Join(dir, "pgdata"))
		out, _ := runDevDB(t, script, env, "start")
		st, err := os.Stat(victim)
		if err != nil || st.Mode().Perm() != 0o755 || st.Sys().(*syscall.Stat_t).Uid != 0 {
			t.Fatalf("root's directory through postgres's link in place of pgdata: got %v, %v, want mode 755 and root's as it was; output:\n%s", st.Mode(), err, out)
		}
		if entries, err := os.ReadDir(victim); err != nil || len(entries) != 0 {
			t.Fatalf("root's directory through postgres's link: got %d entries, %v, want none made in it; output:\n%s", len(entries), err, out)
		}
	})
	t.Run("ServerLogLink", func(t *testing.T) {
		_, _, script, env := closedCheckout(t)
		if out, err := runDevDB(t, script, env, "start"); err != nil {
			t.Fatalf("start: %v\n%s", err, out)
		}
		if out, err := runDevDB(t, script, env, "stop"); err != nil {
			t.Fatalf("stop: %v\n%s", err, out)
		}
		dir := strings.TrimSpace(string(mustRead(t, filepath.Join(filepath.Dir(filepath.Dir(script)), ".dev", "cluster-dir"))))
		const secret = "a line only root may read"
		victim := filepath.Join(t.TempDir(), "root-only")
		if err := os.WriteFile(victim, []byte(secret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		// The server cannot start (its configuration is broken), and its log is a link.
		asPostgres("sh", "-c", `echo 'this is not a setting' >>"$1/pgdata/postgresql.conf"`, "sh", dir)
		asPostgres("ln", "-sf", victim, filepath.Join(dir, "run", "postgres.log"))
		out, err := runDevDB(t, script, env, "start")
		if err == nil {
			t.Fatalf("start with a broken configuration: got started, want it to fail; output:\n%s", out)
		}
		if strings.Contains(out, secret) {
			t.Fatalf("start printed root's file through postgres's link in place of the server's log:\n%s", out)
		}
	})
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDevDB_URLHidesThePassword: `devdb.sh url` prints the URL with its password masked, for
// people and logs; `url --password` gives the URL itself, to be captured (as make run does),
// and reaches the database; `make run` says which database it uses without the password.
func TestDevDB_URLHidesThePassword(t *testing.T) {
	asRoot(t)
	base := openTempDir(t)
	script, env := devCheckout(t, base)
	if out, err := runDevDB(t, script, env, "start"); err != nil {
		t.Fatalf("start: %v\n%s", err, out)
	}
	password := strings.TrimSpace(string(mustRead(t, filepath.Join(base, "repo", ".dev", "password"))))
	if len(password) < 32 {
		t.Fatalf("the password in .dev: got %d characters, want at least 32", len(password))
	}
	shown, err := runDevDB(t, script, env, "url")
	if err != nil || strings.Contains(shown, password) || !strings.Contains(shown, "postgres://postgres:***@127.0.0.1:") {
		t.Fatalf("devdb.sh url: got %q, %v, want the URL with its password masked", shown, err)
	}
	full, err := runDevDB(t, script, env, "url", "--password")
	if err != nil {
		t.Fatal(err)
	}
	if q, err := exec.Command("psql", "-X", "-w", "-tAc", "SELECT 1", strings.TrimSpace(full)).CombinedOutput(); err != nil || strings.TrimSpace(string(q)) != "1" {
		t.Fatalf("psql with devdb.sh url --password: got %q, %v, want a database that answers", q, err)
	}
	// make run, up to the server: GO=true builds nothing, so the run stops where the server
	// would start, having said which database it uses.
	makefile, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(base, "repo")
	if err := os.WriteFile(filepath.Join(repo, "Makefile"), makefile, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("make", "-s", "run", "GO=true")
	cmd.Dir, cmd.Env = repo, env
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), "make run: using the development database postgres://postgres:***@") || strings.Contains(string(out), password) {
		t.Fatalf("make run's output: got\n%s\nwant the development database named with its password masked", out)
	}
}
