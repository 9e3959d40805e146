// Package docs holds no code: its tests keep the documentation honest. They run every curl
// line of every page (bootstrap.md, kubernetes.md, security.md, ...) and of the README's quick
// start against a real server, check
// the example Kubernetes manifests and the settings against the flags the binary really has,
// and check that the links between the pages lead somewhere.
package docs

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/test/harness/amtest"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// docVars are the shell variables the doc's curl lines may use. The test sets the first three
// (the people's port and the operator's, as the chart installs the server, and the operator
// token); the others are what the doc tells the reader to keep from an answer: API_KEY the key
// of the last claim (api_key.key), LINK_TOKEN the token of the last set-password link, KEY the
// key of the last API key made (key). On the pages that run an Alertmanager (alertmanagerPages),
// ALERTMANAGER_URL is where it listens, and INTEGRATION_KEY the key of the last integration
// made (keys[0].key), which the test also writes to that Alertmanager's credentials_file.
var docVars = []string{"TERDUT_URL", "OPERATOR_URL", "OPERATOR_TOKEN", "API_KEY", "LINK_TOKEN", "KEY",
	"ALERTMANAGER_URL", "INTEGRATION_KEY"}

// alertmanagerPages run beside a real Alertmanager (test/harness/amtest) whose receiver posts to
// the page's server. What it sends arrives later than the line that fed it: on these pages a
// line that only reads (no -X, no -d) is tried again, for a minute at most, until its status
// and the answer shown match.
var alertmanagerPages = []string{"incidents.md"}

var (
	fencePattern = regexp.MustCompile("^\\s*```+\\s*([A-Za-z0-9_-]*)")
	// A curl line ends with the outcome the doc promises: "# → 403" or "# → 403 some_code".
	expectPattern = regexp.MustCompile(`^(.*?)\s+# → (\d{3})(?: ([a-z_]+))?\s*$`)
	varPattern    = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)`)
	curlPattern   = regexp.MustCompile(`^\$?\s*curl(\s|$)`)
	curlWord      = regexp.MustCompile(`\bcurl\b`)
)

// curlStep is one curl line of a fenced sh block and the response the doc promises for it.
type curlStep struct {
	Line    int    // 1-based line number in the doc
	Command string // the line without its expectation comment
	Status  int
	Code    string // the error body's "code", or "" when the doc names none
	// Response is the ```json block that follows this line's sh block, when this is the
	// block's last curl line: the body the doc shows for it. ResponseLine is where it starts.
	Response     string
	ResponseLine int
}

// parseCurlSteps returns the curl lines of doc's ```sh blocks, in order, each with the JSON
// response the doc shows for it, if any. It fails, naming every offending line, when a curl
// line could not be checked: outside a ```sh block, not at the start of its line, continued
// onto the next line, without its expected status, or using a variable the test does not set.
func parseCurlSteps(doc string) ([]curlStep, error) {
	var steps []curlStep
	var problems []error
	inFence, lang, fenceLine := false, "", 0
	blockStart, answers := 0, -1 // answers: the step a following ```json block shows the response of
	var block []string
	for i, raw := range strings.Split(doc, "\n") {
		n, line := i+1, strings.TrimSpace(raw)
		if m := fencePattern.FindStringSubmatch(raw); m != nil {
			switch {
			case !inFence:
				inFence, lang, fenceLine, blockStart, block = true, m[1], n, len(steps), nil
				if lang != "json" && lang != "sh" {
					answers = -1
				}
			case lang == "sh":
				inFence, answers = false, -1
				if len(steps) > blockStart {
					answers = len(steps) - 1
				}
			default:
				inFence = false
				if lang == "json" && answers >= 0 {
					steps[answers].Response, steps[answers].ResponseLine = strings.Join(block, "\n"), fenceLine+1
				}
				answers = -1
			}
			continue
		}
		if !inFence {
			continue
		}
		block = append(block, raw)
		isCurl := curlPattern.MatchString(line)
		if lang != "sh" {
			if isCurl {
				problems = append(problems, fmt.Errorf("line %d: a curl line in a ```%s block is not tested; put it in a ```sh block", n, lang))
			}
			continue
		}
		if !isCurl {
			if !strings.HasPrefix(line, "#") && curlWord.MatchString(line) {
				problems = append(problems, fmt.Errorf("line %d: curl must start its line to be tested: %s", n, line))
			}
			continue
		}
		m := expectPattern.FindStringSubmatch(line)
		if m == nil {
			problems = append(problems, fmt.Errorf("line %d: a curl line must end with its expected status, like \"# → 200\": %s", n, line))
			continue
		}
		st := curlStep{Line: n, Command: strings.TrimPrefix(m[1], "$ "), Code: m[3]}
		st.Status, _ = strconv.Atoi(m[2])
		if strings.HasSuffix(st.Command, `\`) {
			problems = append(problems, fmt.Errorf("line %d: keep each curl command on one line", n))
			continue
		}
		for _, v := range varPattern.FindAllStringSubmatch(st.Command, -1) {
			if !slices.Contains(docVars, v[1]) {
				problems = append(problems, fmt.Errorf("line %d: $%s is not one of the variables the test sets (%s)", n, v[1], strings.Join(docVars, ", ")))
			}
		}
		steps = append(steps, st)
	}
	if inFence {
		problems = append(problems, fmt.Errorf("line %d: this fenced block is never closed", fenceLine))
	}
	return steps, errors.Join(problems...)
}

// placeholderPattern marks a value the doc cannot know, such as "<64 hexadecimal characters>".
var placeholderPattern = regexp.MustCompile(`^<.+>$`)

// matchJSON compares a body the doc shows (want) with a real one (got): the same keys at
// every level and the same values, except that a "<placeholder>" string stands for any
// string and a timestamp (a key ending in _at) for any string or null; an array matches an
// array of the same length, element by element. It returns every difference, each with its path.
func matchJSON(path string, want, got any) []string {
	switch w := want.(type) {
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: got %v, want an array of %d", path, got, len(w))}
		}
		var diffs []string
		for i := range w {
			diffs = append(diffs, matchJSON(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])...)
		}
		return diffs
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: got %v, want an object", path, got)}
		}
		var diffs []string
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				diffs = append(diffs, fmt.Sprintf("%s.%s: missing from the real response", path, k))
				continue
			}
			if strings.HasSuffix(k, "_at") {
				if _, isNum := gv.(float64); isNum {
					diffs = append(diffs, fmt.Sprintf("%s.%s: got %v, want a timestamp or null", path, k, gv))
				}
				continue
			}
			diffs = append(diffs, matchJSON(path+"."+k, wv, gv)...)
		}
		for k := range g {
			if _, ok := w[k]; !ok {
				diffs = append(diffs, fmt.Sprintf("%s.%s: in the real response but not in the doc", path, k))
			}
		}
		slices.Sort(diffs)
		return diffs
	case string:
		if _, ok := got.(string); ok && placeholderPattern.MatchString(w) {
			return nil
		}
	}
	if !reflect.DeepEqual(want, got) {
		return []string{fmt.Sprintf("%s: got %v, want %v", path, got, want)}
	}
	return nil
}

func TestParseCurlSteps(t *testing.T) {
	fence := "```"
	tests := []struct {
		name    string
		doc     string
		want    []curlStep
		wantErr string
	}{
		{name: "OK", doc: "curl outside any block is prose\n" +
			fence + "sh\nexport TERDUT_URL=x\ncurl -X POST \"$TERDUT_URL/a\"  # → 403 some_code\n$ curl \"${TERDUT_URL}/b\" # → 200\n" + fence + "\n" +
			"prose\n" + fence + "json\n{\"b\": 1}\n" + fence + "\n" +
			fence + "sh\ncurl \"$TERDUT_URL/c\"  # → 200\n" + fence + "\n" + fence + "text\nnot a response\n" + fence + "\n" + fence + "json\n{}\n" + fence + "\n",
			want: []curlStep{{Line: 4, Command: `curl -X POST "$TERDUT_URL/a"`, Status: 403, Code: "some_code"},
				{Line: 5, Command: `curl "${TERDUT_URL}/b"`, Status: 200, Response: `{"b": 1}`, ResponseLine: 9},
				{Line: 12, Command: `curl "$TERDUT_URL/c"`, Status: 200}}},
		{name: "ErrNoExpectation", doc: fence + "sh\ncurl \"$TERDUT_URL/a\"\n" + fence, wantErr: "line 2: a curl line must end with its expected status"},
		{name: "ErrContinued", doc: fence + "sh\ncurl -X POST \\  # → 200\n" + fence, wantErr: "line 2: keep each curl command on one line"},
		{name: "ErrOtherBlock", doc: fence + "bash\ncurl \"$TERDUT_URL/a\"  # → 200\n" + fence, wantErr: "line 2: a curl line in a ```bash block is not tested"},
		{name: "ErrNotAtStart", doc: fence + "sh\nKEY=$(curl \"$TERDUT_URL/a\")  # → 200\n" + fence, wantErr: "line 2: curl must start its line"},
		{name: "ErrUnknownVariable", doc: fence + "sh\ncurl \"$HOST/a\"  # → 200\n" + fence, wantErr: "line 2: $HOST is not one of the variables"},
		{name: "ErrUnclosed", doc: "\n" + fence + "sh\n", wantErr: "line 2: this fenced block is never closed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseCurlSteps(tt.doc)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestMatchJSON(t *testing.T) {
	tests := []struct {
		name string
		want string
		got  string
		diff []string
	}{
		{name: "OK", want: `{"a": {"key": "<a key>", "created_at": "2025-01-01T00:00:00Z", "n": 1}, "t": null}`,
			got: `{"a": {"key": "0123", "created_at": "2026-11-29T16:30:56Z", "n": 1}, "t": null}`},
		{name: "ErrValue", want: `{"state": "pending", "generation": 0}`, got: `{"state": "complete", "generation": 0}`,
			diff: []string{"$.state: got complete, want pending"}},
		{name: "ErrMissing", want: `{"a": 1, "b": 2}`, got: `{"a": 1}`, diff: []string{"$.b: missing from the real response"}},
		{name: "ErrExtra", want: `{"a": 1}`, got: `{"a": 1, "b": 2}`, diff: []string{"$.b: in the real response but not in the doc"}},
		{name: "ErrPlaceholderNotString", want: `{"key": "<a key>"}`, got: `{"key": 5}`, diff: []string{"$.key: got 5, want <a key>"}},
		{name: "ErrNotObject", want: `{"a": {"b": 1}}`, got: `{"a": [1]}`, diff: []string{"$.a: got [1], want an object"}},
		{name: "Array", want: `[{"id": 1, "created_at": "2025-01-01T00:00:00Z"}]`, got: `[{"id": 1, "created_at": "2026-11-29T16:30:56Z"}]`},
		{name: "ErrArrayElement", want: `[{"id": 1}, {"id": 2}]`, got: `[{"id": 1}, {"id": 3}]`, diff: []string{"$[1].id: got 3, want 2"}},
		{name: "ErrArrayLength", want: `[1, 2]`, got: `[1]`, diff: []string{"$: got [1], want an array of 2"}},
		{name: "ErrWrapped", want: `[{"id": 1}]`, got: `{"users": [{"id": 1}]}`, diff: []string{"$: got map[users:[map[id:1]]], want an array of 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want, got any
			if err := json.Unmarshal([]byte(tt.want), &want); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tt.got), &got); err != nil {
				t.Fatal(err)
			}
			if diff := matchJSON("$", want, got); !slices.Equal(diff, tt.diff) {
				t.Fatalf("got %q, want %q", diff, tt.diff)
			}
		})
	}
}

// docPages are the pages whose curl lines must run: a page missing from the directory fails
// the test rather than leaving its lines unchecked. Any other page of the directory runs too.
var docPages = []string{"bootstrap.md", "kubernetes.md", "security.md"}

// minCurlLines is how many curl lines a page is known to hold at least, so that a page the
// test cannot read (or reads wrongly) fails instead of passing with nothing checked.
var minCurlLines = map[string]int{"bootstrap.md": 10, "incidents.md": 6, readme: 7}

// mustDocPages returns the names of every page of this directory, docPages among them.
func mustDocPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range docPages {
		if !slices.Contains(pages, want) {
			t.Fatalf("got pages %v, want %s among them", pages, want)
		}
	}
	return pages
}

// TestDocs_Curl runs every curl line of every page, in the page's order, against a real
// server of its own whose operator token sits in a file, and checks the status (and error
// code) each line is documented to return. Each page starts from a fresh, unclaimed install.
func TestDocs_Curl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatalf("curl is not installed (%v): the curl lines of the docs cannot be checked without it; install it (Debian: apt-get install curl)", err)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("bash is not installed (%v): the curl lines of the docs are run with bash -c", err)
	}
	// The README's quick start runs against a server like make run's: no operator configured,
	// so the claim is open to this machine. The pages run against one with an operator token.
	pages := append(mustDocPages(t), readme)
	for _, page := range pages {
		t.Run(strings.TrimSuffix(filepath.Base(page), ".md"), func(t *testing.T) {
			doc, err := os.ReadFile(page)
			if err != nil {
				t.Fatal(err)
			}
			steps, err := parseCurlSteps(string(doc))
			if err != nil {
				t.Fatalf("%s:\n%v", page, err)
			}
			if len(steps) < minCurlLines[page] {
				t.Fatalf("got %d curl lines in %s, want at least %d: is the page being read?", len(steps), page, minCurlLines[page])
			}
			if len(steps) > 0 {
				runCurlSteps(t, page, steps, curl, bash, page != readme)
			}
		})
	}
}

// readme is the README, whose quick start's curl lines run like a page's.
const readme = "../README.md"

// runCurlSteps runs the curl lines of page, in order, against one fresh server: with an
// operator token in a file and the operator's endpoints on a port of their own when
// withOperator is true, and with no operator configured and one port otherwise.
// The lines run in a directory of their own, where they may keep files (curl's cookie jar).
func runCurlSteps(t *testing.T, page string, steps []curlStep, curl, bash string, withOperator bool) {
	token := mustOperatorToken(t)
	srv := apitest.NewServer(t, pgtest.MustDatabase(t), func(o *api.Options) {
		o.OperatorTokens = nil
		if withOperator {
			o.OperatorTokens = apitest.TokenFile(t, token)
		}
	})
	// With no operator, as under make run: one port serves everything.
	peopleURL, operatorURL := srv.URL, srv.URL
	if withOperator {
		// As the chart runs it (--operator-listen): the claim, its status and the reset on the
		// operator's port alone, which the people's port answers 404.
		people, operator := api.NewSplitServer(srv.Store, srv.Options)
		peopleSrv, operatorSrv := httptest.NewServer(people), httptest.NewServer(operator)
		t.Cleanup(peopleSrv.Close)
		t.Cleanup(operatorSrv.Close)
		peopleURL, operatorURL = peopleSrv.URL, operatorSrv.URL
	}
	dir := t.TempDir()
	bodyFile := filepath.Join(dir, "body")
	// A minimal environment: nothing from the caller's shell may stand in for a doc variable.
	env := map[string]string{"PATH": filepath.Dir(curl) + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME": dir, "DOCTEST_BODY": bodyFile, "TERDUT_URL": peopleURL, "OPERATOR_URL": operatorURL, "OPERATOR_TOKEN": token}
	withAlertmanager := slices.Contains(alertmanagerPages, filepath.Base(page))
	keyFile := filepath.Join(t.TempDir(), "terdut-key")
	if withAlertmanager {
		if err := os.WriteFile(keyFile, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		am := amtest.Start(t, amtest.Options{WebhookURL: peopleURL + "/api/webhooks/alertmanager", CredentialsFile: keyFile})
		env["ALERTMANAGER_URL"] = am.URL
	}
	// curl is wrapped so that the doc's line stays as written while the test sees the status
	// and the body; set -u turns a variable the doc never provided into a failure.
	const prelude = `set -eu
curl() { command curl --silent --show-error --noproxy '*' --max-time 10 --output "$DOCTEST_BODY" --write-out '%{http_code}' "$@"; }
`
	for _, st := range steps {
		t.Run(fmt.Sprintf("line_%d", st.Line), func(t *testing.T) {
			// curl leaves the file alone when the body is empty: never read the last step's.
			if err := os.Remove(bodyFile); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
			run := func() (string, []byte) {
				cmd := exec.CommandContext(t.Context(), bash, "-c", prelude+st.Command)
				cmd.Dir = dir
				for k, v := range env {
					cmd.Env = append(cmd.Env, k+"="+v)
				}
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				if err != nil {
					t.Fatalf("%s line %d: %s\nfailed: %v\n%s", page, st.Line, st.Command, err, stderr.String())
				}
				body, err := os.ReadFile(bodyFile)
				if err != nil && !errors.Is(err, os.ErrNotExist) {
					t.Fatal(err)
				}
				return string(out), body
			}
			out, body := run()
			reads := !strings.Contains(st.Command, " -X ") && !strings.Contains(st.Command, " -d ")
			for deadline := time.Now().Add(time.Minute); withAlertmanager && reads && time.Now().Before(deadline) &&
				!stepMatches(st, out, body); {
				time.Sleep(250 * time.Millisecond)
				out, body = run()
			}
			if got := string(out); got != strconv.Itoa(st.Status) {
				t.Fatalf("%s line %d: %s\ngot status %s, want %d; body: %s", page, st.Line, st.Command, got, st.Status, body)
			}
			var resp struct {
				Code   string
				APIKey struct{ Key string }   `json:"api_key"`
				Token  string                 // a set-password link's
				Key    string                 // an API key's
				Keys   []struct{ Key string } // an integration's
			}
			_ = json.Unmarshal(body, &resp) // not every body is JSON; the checks below say what is missing
			if st.Code != "" && resp.Code != st.Code {
				t.Fatalf("%s line %d: %s\ngot code %q, want %q; body: %s", page, st.Line, st.Command, resp.Code, st.Code, body)
			}
			for name, v := range map[string]string{"API_KEY": resp.APIKey.Key, "LINK_TOKEN": resp.Token, "KEY": resp.Key} {
				if v != "" {
					env[name] = v
				}
			}
			if len(resp.Keys) > 0 && resp.Keys[0].Key != "" {
				// As the doc tells its reader: the key goes to Alertmanager's credentials_file.
				env["INTEGRATION_KEY"] = resp.Keys[0].Key
				if err := os.WriteFile(keyFile, []byte(resp.Keys[0].Key), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if st.Response != "" {
				var want, got any
				if err := json.Unmarshal([]byte(st.Response), &want); err != nil {
					t.Fatalf("%s line %d: the response shown is not JSON: %v", page, st.ResponseLine, err)
				}
				if err := json.Unmarshal(body, &got); err != nil {
					t.Fatalf("%s line %d: %s\ngot a body that is not JSON (%v): %s", page, st.Line, st.Command, err, body)
				}
				if diff := matchJSON("$", want, got); len(diff) > 0 {
					t.Fatalf("%s line %d: the response shown differs from the real one of line %d:\n%s\nreal body: %s",
						page, st.ResponseLine, st.Line, strings.Join(diff, "\n"), body)
				}
			}
		})
	}
}

// stepMatches reports whether a step's status (out) and body are what the doc shows.
func stepMatches(st curlStep, out string, body []byte) bool {
	if out != strconv.Itoa(st.Status) {
		return false
	}
	if st.Response == "" {
		return true
	}
	var want, got any
	if json.Unmarshal([]byte(st.Response), &want) != nil || json.Unmarshal(body, &got) != nil {
		return false
	}
	return len(matchJSON("$", want, got)) == 0
}

// mustOperatorToken returns a fresh token shaped like the doc's `openssl rand -hex 32`.
func mustOperatorToken(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
