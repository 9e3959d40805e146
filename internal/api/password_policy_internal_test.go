package api

import (
	"errors"
	"flag"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/trustelem/zxcvbn/frequency"
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
		// Every word is common but the phrase is not on the list: it is refused as the
		// famous example it is, however it is written.
		{name: "FamousPassphrase", pw: "correct horse battery staple", code: "password_too_common", says: []string{"commonest passwords"}},
		{name: "FamousPassphraseCamelCase", pw: "CorrectHorseBatteryStaple", code: "password_too_common"},
		{name: "FamousPassphraseDashesAndDigits", pw: "2024-correct-horse-battery-staple!", code: "password_too_common"},
		{name: "FamousPangram", pw: "The quick brown fox jumps over the lazy dog.", code: "password_too_common"},
		{name: "FamousWordsInAnotherOrder", pw: "staple battery horse correct"},
		{name: "FamousPassphraseAndMore", pw: "correct horse battery staple plum"},
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
	if n := len(commonPasswordLines()); n < 30000 {
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

var updateCommon = flag.Bool("update", false, "write common_passwords.txt from zxcvbn's frequency lists")

// TestCommonPasswords_AsZxcvbn: the embedded list is zxcvbn's frequency lists, every entry
// lower-cased, sorted and once, behind its notice; every entry is found and nothing between
// two entries is. -update writes it from the lists.
func TestCommonPasswords_AsZxcvbn(t *testing.T) {
	set := map[string]bool{}
	for _, list := range frequency.FrequencyLists {
		for _, w := range list {
			if w = strings.ToLower(w); w != "" && !strings.Contains(w, "\n") {
				set[w] = true
			}
		}
	}
	words := slices.Sorted(maps.Keys(set))
	want := commonPasswordsNotice + "\n" + strings.Join(words, "\n") + "\n"
	if *updateCommon {
		if err := os.WriteFile("common_passwords.txt", []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Skip("wrote common_passwords.txt: build again to embed it")
	}
	if commonPasswordList != want {
		t.Fatalf("common_passwords.txt is not zxcvbn's lists (%d entries): run go test ./internal/api -run TestCommonPasswords_AsZxcvbn -update", len(words))
	}
	lines := commonPasswordLines()
	if len(lines) != len(words) {
		t.Fatalf("%d entries read, want %d", len(lines), len(words))
	}
	for i, w := range words {
		if commonPassword(lines, i) != w || !isCommon(w) || isCommon(w+"\x00") {
			t.Fatalf("entry %d %q: read %q, found %v; %q found %v", i, w, commonPassword(lines, i), isCommon(w), w+"\x00", isCommon(w+"\x00"))
		}
	}
	if isCommon("") || isCommon("\xff") {
		t.Error("the empty string or one after every entry is found")
	}
}

// commonPasswordsNotice is common_passwords.txt's first line.
const commonPasswordsNotice = "# The frequency lists of zxcvbn, lower-cased and sorted, one a line: from github.com/trustelem/zxcvbn (Copyright (c) 2018 Vincent Vanackere and Trustelem, MIT License), a port of github.com/dropbox/zxcvbn (Copyright (c) 2012-2016 Dan Wheeler and Dropbox, Inc., MIT License)"
