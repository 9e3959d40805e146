package bench

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// The API-key figures and the sign-in flood measure processes of their own, as they run in
// production: the terdut-server binary and the floor (bench/floor), each built by the run,
// each with its own Go runtime (GOMAXPROCS, heap, GC) and nothing else in it. The load comes
// from wrk, a third process, and CPU time is read per process from /proc.

// process is one running server process.
type process struct {
	name string
	cmd  *exec.Cmd
	URL  string        // http://127.0.0.1:port
	out  string        // the file of its standard output and error
	done chan struct{} // closed when the process has exited
}

// moduleRoot finds the module's root from this package's source.
func moduleRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("the bench cannot locate its source")
	}
	return filepath.Dir(filepath.Dir(file)), nil
}

// buildBinaries builds terdut-server and the floor into a temporary directory and returns
// their paths.
func buildBinaries(tb testing.TB) (server, floor string) {
	tb.Helper()
	root, err := moduleRoot()
	if err != nil {
		tb.Fatalf("bench: %v", err)
	}
	dir := tb.TempDir()
	cmd := exec.CommandContext(tb.Context(), "go", "build", "-o", dir+string(filepath.Separator),
		"./cmd/terdut-server", "./bench/floor")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("bench: go build: %v\n%s", err, out)
	}
	return filepath.Join(dir, "terdut-server"), filepath.Join(dir, "floor")
}

// startProcess runs binary with args plus --listen on a free loopback port (and, with
// publicURL, --public-url at that address), and waits until it answers HTTP. The process
// is killed when tb ends.
func startProcess(tb testing.TB, name, binary string, publicURL bool, env []string, args ...string) *process {
	tb.Helper()
	port, err := freePort()
	if err != nil {
		tb.Fatalf("bench: %v", err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	p := &process{name: name, URL: "http://" + addr, out: filepath.Join(tb.TempDir(), "out"), done: make(chan struct{})}
	args = append(args, "--listen", addr)
	if publicURL {
		args = append(args, "--public-url", p.URL)
	}
	p.cmd = exec.Command(binary, args...)
	p.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	// A file, not a pipe into this process: the server writes its log as it would in a
	// container, and nothing here spends CPU time reading it.
	out, err := os.Create(p.out)
	if err != nil {
		tb.Fatalf("bench: %v", err)
	}
	defer out.Close() // the child has its own descriptor
	p.cmd.Stdout, p.cmd.Stderr = out, out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		tb.Fatalf("bench: start %s: %v", name, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	tb.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	if err := p.waitHTTP(30 * time.Second); err != nil {
		tb.Fatalf("bench: %s: %v\n%s", name, err, p.output())
	}
	return p
}

// output returns the end of what the process wrote (its access log can be long).
func (p *process) output() string {
	b, err := os.ReadFile(p.out)
	if err != nil {
		return err.Error()
	}
	if len(b) > 8<<10 {
		b = b[len(b)-8<<10:]
	}
	return string(b)
}

// waitHTTP waits until the process answers any HTTP request.
func (p *process) waitHTTP(limit time.Duration) error {
	probe := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(limit)
	for {
		resp, err := probe.Get(p.URL + "/healthz")
		if err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("exited before answering: %v", p.cmd.ProcessState)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer within %s: %w", limit, err)
		}
	}
}

// cpu returns the CPU time the process has used so far.
func (p *process) cpu() (time.Duration, error) {
	st, err := readStat(p.cmd.Process.Pid)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", p.name, err)
	}
	return st.utime + st.stime, nil
}

// freePort asks the kernel for a free loopback port. Another process could take it before
// the server listens on it; on a machine running the bench that does not happen.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
