package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/test/harness/apitest"
)

// startTimeout bounds how long a process may take to listen and to pass /healthz, and
// stopTimeout how long it may take to exit after SIGTERM (past its own 20 s drain). Both bound
// a hang, not the speed: the suite runs on busy machines too.
const (
	startTimeout = 2 * time.Minute
	stopTimeout  = time.Minute
)

var probeClient = &http.Client{Timeout: 2 * time.Second}

// server is one running terdut-server process.
type server struct {
	name string
	cmd  *exec.Cmd
	URL  string // where the process listens, such as http://127.0.0.1:41234

	stdout, stderr apitest.SyncBuffer
	listening      chan string   // the address, once the process logs that it listens
	done           chan struct{} // closed when the process has exited
	exitErr        error         // cmd.Wait's result, set before done is closed
	stopped        bool
}

// launch starts the binary with settings (TERDUT_* variables) as its whole environment,
// beside PATH. It returns at once; see waitReady. The process is stopped when the test ends.
func launch(t *testing.T, name string, settings map[string]string) *server {
	t.Helper()
	s := &server{name: name, listening: make(chan string, 1), done: make(chan struct{})}
	s.cmd = exec.Command(binary)
	s.cmd.Env = environ(settings)
	s.cmd.Stdout = &s.stdout
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	dieWithParent(s.cmd)
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go s.readLogs(stderr)
	t.Cleanup(func() {
		s.stop(t)
		if t.Failed() {
			t.Logf("%s stdout:\n%s\n%s stderr:\n%s", name, s.stdout.String(), name, s.stderr.String())
		}
	})
	return s
}

// readLogs keeps the process's log lines, watches for the one saying where it listens, and
// reaps the process once its log ends.
func (s *server) readLogs(stderr io.Reader) {
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		s.stderr.Write(append(line, '\n'))
		var entry struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal(line, &entry) == nil && entry.Msg == "terdut-server listening" {
			select {
			case s.listening <- entry.Addr:
			default:
			}
		}
	}
	_, _ = io.Copy(io.Discard, stderr)
	s.exitErr = s.cmd.Wait()
	close(s.done)
}

// waitReady waits until the process listens and answers /healthz.
func (s *server) waitReady(t *testing.T) {
	t.Helper()
	deadline := time.After(startTimeout)
	select {
	case addr := <-s.listening:
		s.URL = "http://" + addr
	case <-s.done:
		t.Fatalf("%s exited before listening: %v\n%s", s.name, s.exitErr, s.stderr.String())
	case <-deadline:
		t.Fatalf("%s did not listen within %s\n%s", s.name, startTimeout, s.stderr.String())
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := probeClient.Get(s.URL + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-tick.C:
		case <-s.done:
			t.Fatalf("%s exited before /healthz answered: %v\n%s", s.name, s.exitErr, s.stderr.String())
		case <-deadline:
			t.Fatalf("%s: /healthz did not answer 200 within %s: %v", s.name, startTimeout, err)
		}
	}
}

// stop sends SIGTERM and checks that the process drains and exits with status 0. It kills a
// process that does not exit in time. Stopping a stopped process does nothing.
func (s *server) stop(t *testing.T) {
	t.Helper()
	if s.stopped {
		return
	}
	s.stopped = true
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("%s: SIGTERM: %v", s.name, err)
	}
	select {
	case <-s.done:
	case <-time.After(stopTimeout):
		_ = s.cmd.Process.Kill()
		<-s.done
		t.Errorf("%s: got no exit within %s of SIGTERM, want a clean stop", s.name, stopTimeout)
		return
	}
	if s.exitErr != nil {
		t.Errorf("%s: exit after SIGTERM: got %v, want status 0\n%s", s.name, s.exitErr, s.stderr.String())
	}
}

// output is everything the process wrote, for checking that no secret is in it.
func (s *server) output() string { return s.stdout.String() + s.stderr.String() }

// runCLI runs the binary with args and settings and returns its standard output, failing
// the test when it does not exit with status 0.
func runCLI(t *testing.T, settings map[string]string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), startTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = environ(settings)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("terdut-server %v: got %v, want status 0\n%s", args, err, stderr.String())
	}
	return out
}

// environ is the environment of a process: PATH and the settings, nothing of the test's own,
// so that no TERDUT_* variable of the person running the tests leaks in.
func environ(settings map[string]string) []string {
	env := []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range settings {
		env = append(env, k+"="+v)
	}
	return env
}
