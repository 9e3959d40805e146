package docs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

var (
	headingPattern = regexp.MustCompile(`^#{1,6}\s+(.+?)\s*#*\s*$`)
	// A Markdown link or image: [text](target) or [text](target "title").
	linkPattern = regexp.MustCompile(`\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)
	// A mention of a page in code, a comment or a message: docs/bootstrap.md#the-gate.
	mentionPattern = regexp.MustCompile(`\bdocs/([a-z0-9_-]+\.md)(#[a-z0-9_-]+)?`)
	// An inline code span, whose text is never a link.
	codeSpanPattern = regexp.MustCompile("`[^`]*`")
)

// slug returns the anchor GitHub gives a heading's text: lower-cased, every character but a
// letter, a digit, a space, a hyphen or an underscore dropped, each space a hyphen.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// proseLines returns the lines of a Markdown document outside its fenced code blocks, each
// with its 1-based number; inline code spans are blanked.
func proseLines(doc string) (lines []string, numbers []int) {
	inFence := false
	for i, line := range strings.Split(doc, "\n") {
		if fencePattern.MatchString(line) {
			inFence = !inFence
			continue
		}
		if !inFence {
			lines, numbers = append(lines, codeSpanPattern.ReplaceAllString(line, "``")), append(numbers, i+1)
		}
	}
	return lines, numbers
}

// anchors returns the anchors of doc's headings, a repeated heading numbered as GitHub does
// (the-audit, the-audit-1).
func anchors(doc string) []string {
	var out []string
	seen := map[string]int{}
	inFence := false
	for _, line := range strings.Split(doc, "\n") {
		if fencePattern.MatchString(line) {
			inFence = !inFence
			continue
		}
		m := headingPattern.FindStringSubmatch(line)
		if inFence || m == nil {
			continue
		}
		a := slug(m[1])
		if n := seen[a]; n > 0 {
			out = append(out, fmt.Sprintf("%s-%d", a, n))
		} else {
			out = append(out, a)
		}
		seen[a]++
	}
	return out
}

// checkTarget reports what is wrong with target (a path, an optional #anchor) as seen from
// a file in dir, or "" when it leads somewhere: the path exists and, for a Markdown page, the
// anchor is one of its headings'. An empty path is the file self.
func checkTarget(dir, self, target string) string {
	p, anchor, _ := strings.Cut(target, "#")
	file := self
	if p != "" {
		file = filepath.Join(dir, filepath.FromSlash(p))
	}
	if _, err := os.Stat(file); err != nil {
		return fmt.Sprintf("%s does not exist", p)
	}
	if anchor == "" || !strings.HasSuffix(file, ".md") {
		return ""
	}
	doc, err := os.ReadFile(file)
	if err != nil {
		return err.Error()
	}
	if !slices.Contains(anchors(string(doc)), anchor) {
		return fmt.Sprintf("%s has no heading with the anchor #%s", filepath.Base(file), anchor)
	}
	return ""
}

func TestAnchors(t *testing.T) {
	doc := "# Title\n## The operator's service-account token\n### Status: `GET /api/bootstrap/status`\n" +
		"```sh\n# not a heading\n```\n## The audit\n## The audit\n"
	want := []string{"title", "the-operators-service-account-token", "status-get-apibootstrapstatus", "the-audit", "the-audit-1"}
	if got := anchors(doc); !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// TestDocs_Links checks that every relative link of README.md and of the pages leads to a
// file that exists and, into a page, to one of its headings.
func TestDocs_Links(t *testing.T) {
	files := append([]string{"../README.md"}, mustDocPages(t)...)
	checked := 0
	for _, f := range files {
		doc, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines, numbers := proseLines(string(doc))
		for i, line := range lines {
			for _, m := range linkPattern.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				if problem := checkTarget(filepath.Dir(f), f, target); problem != "" {
					t.Errorf("%s line %d: the link to %s leads nowhere: %s", filepath.Base(f), numbers[i], target, problem)
				}
			}
		}
	}
	// README.md links to the pages, and the pages to each other: none is a sign the links
	// are no longer found.
	if checked < 20 {
		t.Fatalf("got %d relative links, want at least 20: are the links being found?", checked)
	}
}

// TestDocs_Mentions checks that every mention of a page as docs/<page>.md#<anchor>, in the
// repository's code, comments, messages, manifests and migrations, names a page and a
// heading that exist.
func TestDocs_Mentions(t *testing.T) {
	exts := []string{".go", ".sql", ".yaml", ".yml", ".md", ".sh", ".txt"}
	found := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != ".." && name != ".ci" && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "vendor" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !slices.Contains(exts, filepath.Ext(path)) && d.Name() != "Makefile" && filepath.Base(filepath.Dir(path)) != ".ci" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range mentionPattern.FindAllStringSubmatch(line, -1) {
				found++
				if problem := checkTarget(".", m[1], m[1]+m[2]); problem != "" {
					t.Errorf("%s line %d: %s leads nowhere: %s", path, i+1, m[0], problem)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found == 0 {
		t.Fatalf("got no mention of docs/<page>.md in the repository, want the README's and the manifests' at least")
	}
}
