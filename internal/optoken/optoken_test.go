package optoken_test

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/terdut-server/terdut-server/internal/optoken"
)

const (
	tokenA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-A"
	tokenB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb-B"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    []string
		wantErr string
	}{
		{"OneToken", tokenA + "\n", []string{tokenA}, ""},
		{"NoTrailingNewline", tokenA, []string{tokenA}, ""},
		{"CommentsAndBlanks", "# rotated 2026-11\n\n  " + tokenA + "  \n#old\n" + tokenB + "\r\n", []string{tokenA, tokenB}, ""},
		{"ExactlyMinLength", strings.Repeat("x", 32), []string{strings.Repeat("x", 32)}, ""},
		{"TooShort", "# c\n" + strings.Repeat("x", 31), nil, "line 2: a token must be at least 32 characters"},
		{"InnerSpace", "abcdefghijklmnop qrstuvwxyz0123456789", nil, "line 1, character 17: a token may hold only printable ASCII characters, no spaces"},
		{"ControlCharacter", strings.Repeat("y", 32) + "\x01", nil, "control characters"},
		{"Empty", "", nil, "holds no token"},
		{"OnlyComments", "# nothing\n\n", nil, "holds no token"},
		{"TooLarge", strings.Repeat(tokenA+"\n", 2000), nil, "larger than"},
		{"ByteOrderMark", "\ufeff" + tokenA + "\n" + tokenB, []string{tokenA, tokenB}, ""},
		{"ByteOrderMarkBeforeComment", "\ufeff# c\n" + tokenA, []string{tokenA}, ""},
		{"ByteOrderMarkNotFirst", tokenA + "\n\ufeff" + tokenB, nil, "line 2, character 1: a token may hold only printable ASCII"},
		{"NoBreakSpaceInside", "# c\n\n" + tokenA[:10] + "\u00a0" + tokenA[10:], nil, "line 3, character 11: a token may hold only printable ASCII"},
		{"NoBreakSpaceAround", "\u00a0" + tokenA + "\u00a0", nil, "line 1, character 1:"},
		{"NonASCIICountedInCharacters", strings.Repeat("x", 30) + "é", nil, "line 1, character 31:"},
		{"Tab", tokenA[:5] + "\t" + tokenA[5:], nil, "line 1, character 6:"},
		{"DeleteCharacter", tokenA + "\x7f", nil, "printable ASCII"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := optoken.Parse([]byte(tt.content))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got err %v, want it to contain %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), strings.TrimSpace(tt.content)) && len(tt.content) > 0 {
					t.Fatalf("error %q quotes the token", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("got err %v, want nil", err)
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestSource_Check(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	writeFile(t, path, tokenA+"\n")
	var logs bytes.Buffer
	src, err := optoken.Load(path, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	check := func(token string, want bool) {
		t.Helper()
		if got := src.Check(token); got != want {
			t.Fatalf("Check(%.6s…) = %v, want %v", token, got, want)
		}
	}
	t.Run("OK", func(t *testing.T) { check(tokenA, true) })
	t.Run("Wrong", func(t *testing.T) {
		check(tokenB, false)
		check("", false)
		check(tokenA[:len(tokenA)-1], false)
		check(tokenA+"x", false)
	})
	t.Run("RotationWithoutRestart", func(t *testing.T) {
		writeFile(t, path, tokenA+"\n"+tokenB+"\n")
		check(tokenA, true)
		check(tokenB, true)
		writeFile(t, path, "# A retired\n"+tokenB+"\n")
		check(tokenA, false)
		check(tokenB, true)
	})
	t.Run("InvalidFileKeepsLastGoodTokens", func(t *testing.T) {
		writeFile(t, path, "short\n")
		check(tokenB, true)
		check("short", false)
		if !strings.Contains(logs.String(), "operator token file is invalid") {
			t.Fatalf("got logs %q, want the invalid file reported", logs.String())
		}
		if strings.Contains(logs.String(), tokenB) || strings.Contains(logs.String(), "short\n") {
			t.Fatalf("logs hold a token: %q", logs.String())
		}
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		check(tokenB, true)
		writeFile(t, path, tokenA+"\n")
		check(tokenA, true)
		check(tokenB, false)
	})
	t.Run("Concurrent", func(t *testing.T) {
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 50 {
					if i == 0 {
						writeFile(t, path, tokenA+"\n")
					}
					if !src.Check(tokenA) {
						t.Error("Check(tokenA) = false during rewrites, want true")
						return
					}
				}
			}()
		}
		wg.Wait()
	})
}

func TestLoad_Errors(t *testing.T) {
	dir := t.TempDir()
	t.Run("Missing", func(t *testing.T) {
		if _, err := optoken.Load(filepath.Join(dir, "absent"), nil); err == nil {
			t.Fatal("got nil error for a missing file, want one")
		}
	})
	t.Run("ShortTokenRefusesStart", func(t *testing.T) {
		path := filepath.Join(dir, "short")
		writeFile(t, path, "too-short-token\n")
		_, err := optoken.Load(path, nil)
		if err == nil || !strings.Contains(err.Error(), "at least 32 characters") || strings.Contains(err.Error(), "too-short-token") {
			t.Fatalf("got %v, want an error naming the rule but not the token", err)
		}
	})
	t.Run("NilSource", func(t *testing.T) {
		var src *optoken.Source
		if src.Configured() || src.Check(tokenA) {
			t.Fatal("a nil Source must be unconfigured and match nothing")
		}
	})
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(tokenA + "\n# c\n\n" + tokenB))
	f.Add([]byte("short"))
	f.Add([]byte("\x00\xff\n" + strings.Repeat("z", 40)))
	f.Fuzz(func(t *testing.T, content []byte) {
		tokens, err := optoken.Parse(content)
		if err != nil {
			return
		}
		for _, tok := range tokens {
			bad := strings.IndexFunc(tok, func(r rune) bool { return r <= ' ' || r >= 0x7f }) >= 0
			if len(tok) < optoken.MinLength || bad || strings.HasPrefix(tok, "#") {
				t.Fatalf("Parse accepted %q", tok)
			}
		}
	})
}
