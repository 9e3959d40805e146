package api

import (
	"fmt"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/trustelem/zxcvbn/frequency"
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

// commonPasswords is the set, lower-cased, of every entry of zxcvbn's frequency lists
// (github.com/trustelem/zxcvbn, MIT): the 30,000 commonest passwords of the 10 million
// passwords Mark Burnett published in 2015, and the commonest words of English Wikipedia and
// of US television and film, first names and surnames, where zxcvbn moved a common password
// that is also one of those. About 94,000 entries, built on first use.
var commonPasswords = sync.OnceValue(func() map[string]struct{} {
	n := 0
	for _, list := range frequency.FrequencyLists {
		n += len(list)
	}
	set := make(map[string]struct{}, n)
	for _, list := range frequency.FrequencyLists {
		for _, w := range list {
			set[strings.ToLower(w)] = struct{}{}
		}
	}
	return set
})

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
	if isCommonPassword(pw) {
		return errPasswordTooCommon
	}
	return nil
}

// isCommonPassword reports whether pw, lower-cased, is on the list, or is an entry of it with
// only digits, punctuation or spaces before or after ("Password2024!"): the first variations
// anyone guessing tries.
func isCommonPassword(pw string) bool {
	common := commonPasswords()
	lower := strings.ToLower(pw)
	if _, ok := common[lower]; ok {
		return true
	}
	for _, keep := range []func(rune) bool{
		func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }, // "trustno1!!!!"
		unicode.IsLetter, // "Password2024!"
	} {
		core := strings.TrimFunc(lower, func(r rune) bool { return !keep(r) })
		if _, ok := common[core]; ok && core != "" {
			return true
		}
	}
	return false
}
