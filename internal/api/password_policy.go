package api

import (
	_ "embed" // the list of common passwords
	"fmt"
	"sort"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// The password rules (OWASP ASVS v4 2.1.1, 2.1.2, 2.1.7). Nothing else is asked of a password:
// no classes of characters, no expiry; a long passphrase is the thing to choose.
const (
	// minPasswordRunes is the shortest password, in characters (runes), not bytes: a passphrase
	// in a script that takes several bytes a character is not refused for its bytes.
	minPasswordRunes = 12
	// maxPasswordBytes is bcrypt's limit: it reads no further, so a longer password is refused
	// rather than cut. In UTF-8 a character outside ASCII takes 2 to 4 bytes.
	maxPasswordBytes = 72
)

var (
	errPasswordTooShort = errBadRequest("invalid_password",
		fmt.Sprintf("A password is at least %d characters long.", minPasswordRunes))
	errPasswordTooCommon = errBadRequest("password_too_common",
		"This password is one of the commonest passwords, words or names, which are tried first by anyone guessing; choose another, such as a few unrelated words.")
)

// commonPasswordList is every entry of zxcvbn's frequency lists (github.com/trustelem/zxcvbn,
// MIT; see common_passwords.txt's first line), lower-cased, sorted and without repeats, a line
// each: the 30,000 commonest passwords of the 10 million passwords Mark Burnett published in
// 2015, and the commonest words of English Wikipedia and of US television and film, first
// names and surnames, where zxcvbn moved a common password that is also one of those. About
// 94,000 entries. It is one string, made by TestCommonPasswords_AsZxcvbn (-update), rather
// than zxcvbn's package: that package's lists are 94,000 strings the garbage collector marked
// at every collection, for the life of the process, about 0.4 ms a collection and 0.3 µs of
// every API-key request on a busy machine (issue 23); a string holds no pointer to mark.
//
//go:embed common_passwords.txt
var commonPasswordList string

// commonPasswordLines are the offsets of the list's entries, in order, made on first use:
// integers, no pointers either.
var commonPasswordLines = sync.OnceValue(func() []uint32 {
	body := commonPasswordList[strings.IndexByte(commonPasswordList, '\n')+1:] // after the notice
	offset := uint32(len(commonPasswordList) - len(body))
	lines := make([]uint32, 0, strings.Count(body, "\n"))
	for line := range strings.Lines(body) {
		lines = append(lines, offset)
		offset += uint32(len(line))
	}
	return lines
})

// commonPassword returns entry i of the list.
func commonPassword(lines []uint32, i int) string {
	e := commonPasswordList[lines[i]:]
	return e[:strings.IndexByte(e, '\n')]
}

// isCommon reports whether lower is an entry of the list.
func isCommon(lower string) bool {
	lines := commonPasswordLines()
	i := sort.Search(len(lines), func(i int) bool { return commonPassword(lines, i) >= lower })
	return i < len(lines) && commonPassword(lines, i) == lower
}

// validatePassword applies the password rules; its errors say which rule and what to do.
func validatePassword(pw string) error {
	if n := len(pw); n > maxPasswordBytes {
		return errBadRequest("invalid_password", fmt.Sprintf(
			"A password is at most %d bytes in UTF-8, which bcrypt reads no further than; this one is %d bytes. "+
				"A character outside ASCII takes 2 to 4 bytes.", maxPasswordBytes, n))
	}
	if utf8.RuneCountInString(pw) < minPasswordRunes {
		return errPasswordTooShort
	}
	if isCommonPassword(pw) || isFamousPassphrase(pw) {
		return errPasswordTooCommon
	}
	return nil
}

// famousPassphrases are passphrases made famous by being printed as examples, which every
// cracking dictionary holds whatever their length: the list of common passwords has their
// words one by one, never the phrase. Each is compared by its letters and digits alone, so
// "Correct-Horse-Battery-Staple" is the first.
var famousPassphrases = []string{
	"correct horse battery staple", // xkcd 936, the example of a good passphrase
	"the quick brown fox jumps over the lazy dog",
	"to be or not to be that is the question",
	"may the force be with you",
	"all work and no play makes jack a dull boy",
}

// isFamousPassphrase reports whether pw, without its case and every character but letters and
// digits, is one of famousPassphrases (alone, or with digits or punctuation around it).
func isFamousPassphrase(pw string) bool {
	core := lettersAndDigits(pw)
	trimmed := strings.TrimRightFunc(strings.TrimLeftFunc(core, unicode.IsDigit), unicode.IsDigit)
	for _, p := range famousPassphrases {
		if f := lettersAndDigits(p); core == f || trimmed == f {
			return true
		}
	}
	return false
}

// lettersAndDigits returns s lower-cased with every rune but a letter or a digit dropped.
func lettersAndDigits(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return unicode.ToLower(r)
		}
		return -1
	}, s)
}

// isCommonPassword reports whether pw, lower-cased, is on the list, or is an entry of it with
// only digits, punctuation or spaces before or after ("Password2024!"): the first variations
// anyone guessing tries.
func isCommonPassword(pw string) bool {
	lower := strings.ToLower(pw)
	if isCommon(lower) {
		return true
	}
	for _, keep := range []func(rune) bool{
		func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }, // "trustno1!!!!"
		unicode.IsLetter, // "Password2024!"
	} {
		core := strings.TrimFunc(lower, func(r rune) bool { return !keep(r) })
		if core != "" && isCommon(core) {
			return true
		}
	}
	return false
}
