package api

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestValidatePassword: at least 12 characters counted as runes, at most bcrypt's 72 bytes
// (the refusal says so, and how many bytes it got), and none of the commonest passwords.
func TestValidatePassword(t *testing.T) {
	tests := []struct {
		name string
		pw   string
		code string // "" accepted
		says []string
	}{
		{name: "Empty", pw: "", code: "invalid_password", says: []string{"at least 12 characters"}},
		{name: "ElevenASCII", pw: "abcdefghijk", code: "invalid_password", says: []string{"at least 12 characters"}},
		{name: "TwelveASCII", pw: "plum-orbit-k"},
		// 6 characters of 3 bytes each: 18 bytes, which the old rule (8 bytes) took.
		{name: "SixCharactersEighteenBytes", pw: "日本語のパス", code: "invalid_password", says: []string{"at least 12 characters"}},
		// 12 characters of 3 bytes: 36 bytes, accepted by its characters.
		{name: "TwelveCharactersThirtySixBytes", pw: "日本語の長いパスフレーズ"},
		// 24 characters, 72 bytes exactly: the longest bcrypt reads in full.
		{name: "SeventyTwoBytesNonASCII", pw: strings.Repeat("語", 24)},
		{name: "CyrillicPassphrase", pw: "ключ от старой двери"},
		{name: "SeventyThreeBytes", pw: strings.Repeat("p", 73), code: "invalid_password", says: []string{"at most 72 bytes", "73 bytes"}},
		// 25 characters but 75 bytes: refused for its bytes, and the message says bytes.
		{name: "TwentyFiveCharactersSeventyFiveBytes", pw: strings.Repeat("語", 25), code: "invalid_password",
			says: []string{"at most 72 bytes", "75 bytes", "2 to 4 bytes"}},
		{name: "CommonPassword", pw: "qwerty123456", code: "password_too_common", says: []string{"commonest passwords"}},
		{name: "CommonPasswordCapitalised", pw: "1QAZ2WSX3EDC", code: "password_too_common"},
		{name: "CommonWordAndDigits", pw: "Password2024!", code: "password_too_common"},
		{name: "CommonLongWord", pw: "international", code: "password_too_common"},
		{name: "Passphrase", pw: "plum orbit kettle jasmine"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := validatePassword(tt.pw)
			if tt.code == "" {
				if err != nil {
					t.Fatalf("validatePassword(%q) (%d characters, %d bytes): got %v, want nil",
						tt.pw, utf8.RuneCountInString(tt.pw), len(tt.pw), err)
				}
				return
			}
			var ae *apiError
			if !errors.As(err, &ae) || ae.Status != 400 || ae.Code != tt.code {
				t.Fatalf("validatePassword(%q): got %v, want 400 %s", tt.pw, err, tt.code)
			}
			for _, s := range tt.says {
				if !strings.Contains(ae.Message, s) {
					t.Errorf("validatePassword(%q): got message %q, want it to say %q", tt.pw, ae.Message, s)
				}
			}
		})
	}
}

// TestCommonPasswords: the embedded list holds the tens of thousands of commonest passwords,
// and the top of it is refused whatever its length would allow.
func TestCommonPasswords(t *testing.T) {
	if n := len(commonPasswords()); n < 30000 {
		t.Fatalf("common passwords: got %d, want at least 30000", n)
	}
	for i, pw := range []string{"123456", "password", "qwerty", "dragon", "iloveyou", "trustno1"} {
		if !isCommonPassword(pw) {
			t.Errorf("entry %d, %q: got not common, want common", i, pw)
		}
	}
	if isCommonPassword("plum orbit kettle jasmine " + strconv.Itoa(42)) {
		t.Errorf("a passphrase of unrelated words: got common, want not")
	}
}
