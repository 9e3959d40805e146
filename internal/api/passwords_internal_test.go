package api

import (
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// TestPasswords_DummyCost: the dummy hash checked for a name that does not exist is made at the
// configured cost, so that it takes as long as checking a real user's (rehashed) password.
func TestPasswords_DummyCost(t *testing.T) {
	for _, cost := range []int{bcrypt.MinCost, 6} {
		p, err := NewPasswords(cost)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := bcrypt.Cost(p.dummy); err != nil || got != cost {
			t.Fatalf("dummy of NewPasswords(%d): got cost %d, %v, want %d", cost, got, err, cost)
		}
		same, err := p.Hash("a password")
		if err != nil {
			t.Fatal(err)
		}
		other, err := bcrypt.GenerateFromPassword([]byte("a password"), cost+1)
		if err != nil {
			t.Fatal(err)
		}
		if p.NeedsRehash(same) || !p.NeedsRehash(string(other)) || p.NeedsRehash("") {
			t.Fatalf("NeedsRehash at cost %d: got %v for the same cost, %v for cost %d, %v for none; want false, true, false",
				cost, p.NeedsRehash(same), p.NeedsRehash(string(other)), cost+1, p.NeedsRehash(""))
		}
	}
}
