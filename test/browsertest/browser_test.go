//go:build browser

package browsertest

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/terdut-server/terdut-server/test/harness/apitest"
)

const (
	// browserLifetime bounds everything one browser does, start-up included.
	browserLifetime = 2 * time.Minute
	// stepTimeout bounds one action: a navigation with its redirects, a click, a query.
	stepTimeout = 20 * time.Second
	// closeTimeout bounds the graceful close at the end of a test.
	closeTimeout = 10 * time.Second
	// outDir receives the screenshots; it is ignored by git.
	outDir = "out"
)

// chromiumPath is the browser to drive: $CHROMIUM, else Debian's /usr/bin/chromium.
func chromiumPath() string {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	return "/usr/bin/chromium"
}

// browser is one headless Chromium with one tab, pointed at one server.
type browser struct {
	t    *testing.T
	ctx  context.Context // the tab's chromedp context
	base string          // the server's URL, without a trailing slash
}

// newBrowser starts a headless Chromium with a fresh profile for base. The browser and every
// process it started are gone when the test ends. It fails the test, naming the script that
// installs it, when Chromium is not there.
func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	path := chromiumPath()
	if fi, err := os.Stat(path); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		t.Fatalf("no Chromium at %s (stat: %v): run scripts/ensure-chromium.sh as root (`make e2e` does), "+
			"or set CHROMIUM to a Chromium binary", path, err)
	}
	profile := t.TempDir()
	output := &apitest.SyncBuffer{}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox, // we run as root, where Chromium's sandbox cannot start
		chromedp.DisableGPU,
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1024, 768),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.CombinedOutput(output),
	)
	// Not t.Context(): that is cancelled before the cleanups run, and the browser must
	// still be there to be closed gracefully.
	life, cancelLife := context.WithTimeout(context.Background(), browserLifetime)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(life, opts...)
	ctx, cancelTab := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		closeCtx, cancelClose := context.WithTimeout(ctx, closeTimeout)
		err := chromedp.Cancel(closeCtx)
		cancelClose()
		cancelTab()
		cancelAlloc() // kills the browser if the close did not finish, and waits for it
		cancelLife()
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("close Chromium: %v", err)
		}
		if left := stopLeftovers(profile); left > 0 {
			t.Errorf("%d Chromium processes outlived the browser and could not be killed", left)
		}
		if t.Failed() {
			t.Logf("Chromium's output:\n%s", output)
		}
	})
	// The first action starts the browser; it must not run under a step's timeout, which
	// would stop the whole browser when it expires.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium %s: %v\n%s", path, err, output)
	}
	return &browser{t: t, ctx: ctx, base: strings.TrimSuffix(base, "/")}
}

// in returns the same browser reporting to t, for use in a subtest.
func (b *browser) in(t *testing.T) *browser {
	c := *b
	c.t = t
	return &c
}

// step returns a context for one action on the tab.
func (b *browser) step() (context.Context, context.CancelFunc) {
	return context.WithTimeout(b.ctx, stepTimeout)
}

// open navigates to path on the server and returns the response of the page it lands on,
// after any redirects.
func (b *browser) open(path string) *network.Response {
	b.t.Helper()
	ctx, cancel := b.step()
	defer cancel()
	resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(b.base+path))
	if err != nil {
		b.t.Fatalf("open %s: %v", path, err)
	}
	return resp
}

// submit runs the actions, which must make the page navigate (a click on a link or a
// submit button), and returns the response of the page it lands on, after any redirects.
func (b *browser) submit(what string, actions ...chromedp.Action[chromedp.Void]) *network.Response {
	b.t.Helper()
	ctx, cancel := b.step()
	defer cancel()
	resp, err := chromedp.RunResponse(ctx, actions...)
	if err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
	return resp
}

// click clicks the element that sel selects and returns the response of the page the
// browser lands on.
func (b *browser) click(sel chromedp.CSS) *network.Response {
	b.t.Helper()
	return b.submit("click "+string(sel), chromedp.Click(sel))
}

// do runs actions that do not navigate, such as typing into a field.
func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := b.step()
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// text returns the visible text of the element with this id, waiting for it to be visible.
func (b *browser) text(id chromedp.ID) string {
	b.t.Helper()
	ctx, cancel := b.step()
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.WaitVisible(id)); err != nil {
		b.t.Fatalf("wait for #%s on %s: %v", id, b.location(), err)
	}
	s, err := chromedp.Run(ctx, chromedp.Text(id))
	if err != nil {
		b.t.Fatalf("text of #%s: %v", id, err)
	}
	return strings.Join(strings.Fields(s), " ")
}

// has reports whether the page has an element with this id, without waiting for one.
func (b *browser) has(id string) bool {
	b.t.Helper()
	ctx, cancel := b.step()
	defer cancel()
	ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById(`+strconv.Quote(id)+`) !== null`))
	if err != nil {
		b.t.Fatalf("look for #%s: %v", id, err)
	}
	return ok
}

// location returns the path (and query) of the page the tab shows.
func (b *browser) location() string {
	b.t.Helper()
	ctx, cancel := b.step()
	defer cancel()
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		b.t.Fatalf("location: %v", err)
	}
	u, err := url.Parse(loc)
	if err != nil {
		b.t.Fatalf("location %q: %v", loc, err)
	}
	if u.Scheme+"://"+u.Host != b.base {
		return loc
	}
	return u.RequestURI()
}

// screenshot saves the page, as the viewport shows it, to out/<test>-<name>.png and
// returns the file's path.
func (b *browser) screenshot(name string) string {
	b.t.Helper()
	ctx, cancel := b.step()
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		b.t.Fatal(err)
	}
	file := strings.NewReplacer("/", "-", " ", "_").Replace(b.t.Name()) + "-" + name + ".png"
	path, err := filepath.Abs(filepath.Join(outDir, file))
	if err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatalf("save screenshot: %v", err)
	}
	b.t.Logf("screenshot of %s: %s", b.location(), path)
	return path
}

// stopLeftovers kills the processes still running with profile as their user data
// directory (Chromium passes it to every helper process, and a helper can outlive the
// main process by a moment), until none is left or a few seconds have passed. It returns
// how many are still there.
func stopLeftovers(profile string) int {
	want := []byte("--user-data-dir=" + profile)
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := 0
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err != nil {
				continue
			}
			for arg := range bytes.SplitSeq(cmdline, []byte{0}) {
				if bytes.Equal(arg, want) {
					_ = syscall.Kill(pid, syscall.SIGKILL)
					n++
					break
				}
			}
		}
		if n == 0 || time.Now().After(deadline) {
			return n
		}
		time.Sleep(20 * time.Millisecond) // a killed process leaves /proc once its parent reaps it
	}
}
