package sso

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestLookupClaim: a name with a colon is one claim however many dots it has; any other name
// is a path into nested objects, and a top-level claim literally named with its dots is
// never read in its place.
func TestLookupClaim(t *testing.T) {
	claims := map[string]any{
		"groups":                    []any{"a"},
		"realm_access":              map[string]any{"roles": []any{"admin"}},
		"realm_access.roles":        []any{"shadow"},
		"https://example.com/roles": []any{"uri"},
		"urn:zitadel:iam:org:project:roles": map[string]any{
			"admin": map[string]any{"1": "example.com"},
		},
		"flat": "x",
	}
	tests := []struct {
		name string
		want any
	}{
		{"groups", []any{"a"}},
		{"realm_access.roles", []any{"admin"}},
		{"https://example.com/roles", []any{"uri"}},
		{"urn:zitadel:iam:org:project:roles", claims["urn:zitadel:iam:org:project:roles"]},
		{"flat.deeper", nil},
		{"missing", nil},
		{"realm_access.missing", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := lookupClaim(claims, tt.name)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestStringsClaim: an array of strings (other items skipped), one string, or an object whose
// keys are the groups, in order; anything else is none.
func TestStringsClaim(t *testing.T) {
	tests := []struct {
		name  string
		claim any
		want  []string
	}{
		{"Array", []any{"a", 1.0, "b", nil}, []string{"a", "b"}},
		{"String", "ops", []string{"ops"}},
		{"Object", map[string]any{"b": 1, "a": map[string]any{}}, []string{"a", "b"}},
		{"Number", 3.0, nil},
		{"Missing", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := stringsClaim(tt.claim); !slices.Equal(got, tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestSanitizeUsername: what is left of a claim after the characters a username may not have
// are dropped, and its leading punctuation; "" when the server's rules refuse the rest.
func TestSanitizeUsername(t *testing.T) {
	c := New(Config{ValidUsername: func(n string) bool { return n != "reserved" },
		ValidEmail: func(string) bool { return true }})
	tests := []struct{ claim, want string }{
		{"ada", "ada"},
		{"Ada Lovelace", "AdaLovelace"},
		{"._-@ada", "ada"},
		{"ådå", "d"},
		{"...", ""},
		{"reserved", ""},
		{strings.Repeat("a", 80), strings.Repeat("a", 64)},
	}
	for _, tt := range tests {
		if got := c.sanitizeUsername(tt.claim); got != tt.want {
			t.Errorf("sanitizeUsername(%q): got %q, want %q", tt.claim, got, tt.want)
		}
	}
}

// TestSafeErrorCode: a provider's error code is passed on only if it looks like one.
func TestSafeErrorCode(t *testing.T) {
	tests := []struct{ code, want string }{
		{"access_denied", "access_denied"},
		{"login_required", "login_required"},
		{"<script>", "unknown error"},
		{"Access_Denied", "unknown error"},
		{strings.Repeat("a", 65), "unknown error"},
	}
	for _, tt := range tests {
		if got := safeErrorCode(tt.code); got != tt.want {
			t.Errorf("safeErrorCode(%q): got %q, want %q", tt.code, got, tt.want)
		}
	}
}
