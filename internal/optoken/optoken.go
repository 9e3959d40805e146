// Package optoken holds the operator token: the secret that proves a caller is the operator
// that owns this install. Tokens come from a file, one a line, re-read on every check so that
// a rotated Kubernetes Secret takes effect without a restart.
package optoken

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/terdut-server/terdut-server/internal/secretfile"
)

// MinLength is the shortest token accepted.
const MinLength = 32

// maxFileBytes bounds the token file; a larger one is refused rather than read.
const maxFileBytes = 64 << 10

// utf8BOM is the byte order mark some editors put at the start of a file.
var utf8BOM = []byte("\xef\xbb\xbf")

// Parse reads tokens from a token file's content: one a line, blank lines and lines
// starting with # ignored, surrounding spaces and tabs trimmed, a UTF-8 byte order mark at
// the start dropped. A token is printable ASCII (no spaces, control or non-ASCII characters,
// such as a no-break space) and at least MinLength characters long. Parse fails on any other
// line, naming the line (and the offending character's position) but never the token, and
// when there is no token at all.
func Parse(content []byte) ([]string, error) {
	if len(content) > maxFileBytes {
		return nil, fmt.Errorf("the file is larger than %d bytes", maxFileBytes)
	}
	content = bytes.TrimPrefix(content, utf8BOM)
	var tokens []string
	sc := bufio.NewScanner(bytes.NewReader(content))
	sc.Buffer(make([]byte, 0, 4096), maxFileBytes)
	for n := 1; sc.Scan(); n++ {
		line := strings.Trim(sc.Text(), " \t\r\v\f")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexFunc(line, func(r rune) bool { return r <= ' ' || r >= 0x7f }); i >= 0 {
			return nil, fmt.Errorf("line %d, character %d: a token may hold only printable ASCII characters, "+
				"no spaces, control characters or non-ASCII characters (such as a no-break space)", n, utf8.RuneCountInString(line[:i])+1)
		}
		if len(line) < MinLength { // printable ASCII: one byte a character
			return nil, fmt.Errorf("line %d: a token must be at least %d characters (this one has %d)", n, MinLength, len(line))
		}
		tokens = append(tokens, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read tokens: %w", err)
	}
	if len(tokens) == 0 {
		return nil, errors.New("the file holds no token")
	}
	return tokens, nil
}

// Source is the set of operator tokens from a file. The zero of *Source (nil) means no
// token is configured. It is safe for concurrent use.
type Source struct {
	path string
	log  *slog.Logger

	mu      sync.Mutex
	digests [][sha256.Size]byte
	lastErr string
}

// Load reads the token file at path, failing when it cannot be read or parsed, so that a
// server with a bad token file refuses to start and says why.
func Load(path string, log *slog.Logger) (*Source, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Source{path: path, log: log}
	if err := s.reload(); err != nil {
		return nil, fmt.Errorf("operator token file %s: %w", path, err)
	}
	return s, nil
}

// Configured reports whether any operator token is configured.
func (s *Source) Configured() bool { return s != nil }

// Check reports whether token is one of the operator tokens. It first re-reads the file;
// if the file has become unreadable or invalid, the last good tokens stay in force and the
// problem is logged once. The comparison takes the same time whichever token matches, and
// whether any does.
func (s *Source) Check(token string) bool {
	if s == nil {
		return false
	}
	if err := s.reload(); err != nil {
		s.mu.Lock()
		if msg := err.Error(); msg != s.lastErr {
			s.lastErr = msg
			s.log.Error("operator token file is invalid; keeping the tokens read before", "path", s.path, "err", err)
		}
		s.mu.Unlock()
	}
	got := sha256.Sum256([]byte(token))
	s.mu.Lock()
	defer s.mu.Unlock()
	match := 0
	for _, d := range s.digests {
		match |= subtle.ConstantTimeCompare(got[:], d[:])
	}
	return match == 1
}

func (s *Source) reload() error {
	content, err := secretfile.Read(s.path, maxFileBytes)
	if err != nil {
		return err
	}
	tokens, err := Parse(content)
	if err != nil {
		return err
	}
	digests := make([][sha256.Size]byte, len(tokens))
	for i, t := range tokens {
		digests[i] = sha256.Sum256([]byte(t))
	}
	s.mu.Lock()
	s.digests = digests
	s.lastErr = ""
	s.mu.Unlock()
	return nil
}
