package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/oidctest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// The size of the key races: rounds, and the clients of a leaked key minting keys at once.
const (
	keyRaceRounds  = 15
	keyRaceMinters = 12
)

// keyRaceOptions lets the minters mint as fast as they can: no per-user limit in the way, and
// a reset every round.
func keyRaceOptions(o *api.Options) {
	o.APIKeysPerUser = 1 << 20
	o.ResetLimit.Max = 1 << 20
}

// mintingRace is keyRaceMinters clients, each holding the keys it got from a leaked one and
// minting another, for userID, with the newest it holds, on one replica then the other.
type mintingRace struct {
	stop    chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	held    []string       // every key any minter got, the leaked one included
	tries   int            // mint requests answered
	made    int            // of them, 201
	refused map[string]int // the others, by status and code
}

// startMinting starts the minters, each with the leaked key, and returns once every one has
// had a mint answered, so that the operator's requests race minting in full swing.
func startMinting(t *testing.T, replicas []*apitest.Server, userID int64, leaked string) *mintingRace {
	t.Helper()
	m := &mintingRace{stop: make(chan struct{}), held: []string{leaked}, refused: map[string]int{}}
	var started sync.WaitGroup
	started.Add(keyRaceMinters)
	for w := range keyRaceMinters {
		m.wg.Go(func() {
			newest, first := leaked, true
			for i := 0; ; i++ {
				select {
				case <-m.stop:
					return
				default:
				}
				resp, err := replicas[(w+i)%len(replicas)].Do(apitest.Request{Method: http.MethodPost,
					Path: userURL(userID, "/api-keys"), Bearer: newest, Body: map[string]string{"name": "minted"}})
				if first {
					first = false
					started.Done()
				}
				if err != nil {
					continue
				}
				m.mu.Lock()
				m.tries++
				var k struct{ Key string }
				if resp.Status == http.StatusCreated && json.Unmarshal(resp.Body, &k) == nil && k.Key != "" {
					newest = k.Key
					m.held = append(m.held, k.Key)
					m.made++
				} else {
					m.refused[fmt.Sprintf("%d %s", resp.Status, resp.Code())]++
				}
				m.mu.Unlock()
			}
		})
	}
	started.Wait()
	return m
}

// finish stops the minters, waits for their requests in flight, and returns every key they
// held. It fails the test if a mint was refused otherwise than as allowed ("401 unauthorized").
func (m *mintingRace) finish(t *testing.T, allowed ...string) []string {
	t.Helper()
	close(m.stop)
	m.wg.Wait()
	for refusal, n := range m.refused {
		if !slices.Contains(allowed, refusal) {
			t.Errorf("%d mints answered %s, want 201 or one of %v", n, refusal, allowed)
		}
	}
	return m.held
}

// liveKeys returns which of keys answer /api/me on any replica.
func liveKeys(t *testing.T, replicas []*apitest.Server, keys []string) []string {
	t.Helper()
	var live []string
	seen := map[string]bool{}
	for _, k := range keys {
		if seen[k] {
			continue
		}
		seen[k] = true
		for _, srv := range replicas {
			if _, status := whoAmIOn(t, srv, k); status != http.StatusUnauthorized {
				live = append(live, k)
				break
			}
		}
	}
	return live
}

// TestKeys_LeakedPrincipalKeyRacesResetAndClaim is the review's scenario, over two replicas and
// round after round: the bootstrap principal's key has leaked, and its holder runs twelve
// clients minting keys with the newest they hold while the operator resets, then claims. Once
// both have answered, the only key of the principal that works, in the database and over
// HTTP, is the one that claim issued.
func TestKeys_LeakedPrincipalKeyRacesResetAndClaim(t *testing.T) {
	replicas := newReplicas(t, pgtest.MustDatabase(t), 2, oidctest.NewProvider(t), keyRaceOptions)
	leaked := replicas[0].MustClaim(t)
	principal, _ := whoAmIOn(t, replicas[0], leaked)
	var survivors, minted, tries int
	for round := range keyRaceRounds {
		m := startMinting(t, replicas, principal, leaked)
		resp := replicas[1].MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/bootstrap/reset", Bearer: apitest.OperatorToken})
		if resp.Status != http.StatusOK {
			t.Fatalf("round %d: reset: got %d %s, want 200", round, resp.Status, resp.Body)
		}
		claim := replicas[0].MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/bootstrap", Bearer: apitest.OperatorToken})
		if claim.Status != http.StatusCreated {
			t.Fatalf("round %d: claim: got %d %s, want 201", round, claim.Status, claim.Body)
		}
		var body struct {
			APIKey struct {
				ID  int64  `json:"id"`
				Key string `json:"key"`
			} `json:"api_key"`
		}
		claim.JSON(t, &body)
		held := m.finish(t, "403 keys_only_from_claim", "401 unauthorized")
		minted, tries = minted+m.made, tries+m.tries

		live := count(t, replicas[0], `SELECT count(*) FROM api_keys WHERE user_id = $1 AND revoked_at IS NULL
			AND (expires_at IS NULL OR expires_at > now()) AND id <> $2`, principal, body.APIKey.ID)
		alive := liveKeys(t, replicas, held)
		survivors += live
		if live != 0 || len(alive) != 0 {
			t.Errorf("round %d: after the reset and the claim, %d keys of the principal but the claim's are live in the database "+
				"and %d of the %d keys the minters held answer /api/me, want 0 and 0", round, live, len(alive), len(held))
		}
		if _, status := whoAmIOn(t, replicas[1], body.APIKey.Key); status != http.StatusOK {
			t.Errorf("round %d: the claim's key: got %d, want 200", round, status)
		}
		leaked = body.APIKey.Key // next round, the new key is the one that leaks
	}
	t.Logf("over %d rounds: %d mints answered, %d keys minted, %d keys of the principal outlived reset and claim",
		keyRaceRounds, tries, minted, survivors)
	if tries < keyRaceRounds*keyRaceMinters {
		t.Errorf("mints answered: got %d, want at least %d: the minters did not race the operator", tries, keyRaceRounds*keyRaceMinters)
	}
}

// TestKeys_DeprovisioningRacesMinting: the same race against single sign-on deprovisioning. An
// SSO person's key has leaked, its holder mints keys with the newest they hold, and the provider
// drops the person, whose next sign-in is refused for their groups. Once that refusal has
// answered, no key of theirs works, whichever replica minted it.
func TestKeys_DeprovisioningRacesMinting(t *testing.T) {
	p := oidctest.NewProvider(t)
	replicas := newReplicas(t, pgtest.MustDatabase(t), 2, p, func(o *api.Options) {
		keyRaceOptions(o)
		o.OIDC.AllowedGroups = []string{"oncall"}
	})
	replicas[0].MustClaim(t)
	var survivors, minted, tries int
	for round := range keyRaceRounds {
		p.AddUser(oidctest.User{Subject: "sub-lee", PreferredUsername: "lee", Groups: []string{"oncall"}})
		session := replicas[round%2].MustSignInOIDC(t, p, "sub-lee")
		lee := mustMe(t, replicas[0], session)
		leaked := mustCreateKeyAs(t, replicas[0], lee.ID, session, map[string]string{"name": "laptop"}).Key
		m := startMinting(t, replicas, lee.ID, leaked)

		p.AddUser(oidctest.User{Subject: "sub-lee", PreferredUsername: "lee", Groups: []string{"contractors"}})
		resp, err := replicas[1-round%2].SignInOIDC(t.Context(), p, "sub-lee")
		if err != nil {
			t.Fatal(err)
		}
		wantAPIError(t, resp, http.StatusForbidden, "group_not_allowed")
		held := m.finish(t, "401 unauthorized")
		minted, tries = minted+m.made, tries+m.tries

		live := count(t, replicas[0], `SELECT count(*) FROM api_keys WHERE user_id = $1 AND revoked_at IS NULL
			AND (expires_at IS NULL OR expires_at > now())`, lee.ID)
		alive := liveKeys(t, replicas, held)
		survivors += live
		if live != 0 || len(alive) != 0 {
			t.Errorf("round %d: after the deprovisioning, %d keys of lee are live in the database and %d of the %d keys "+
				"the minters held answer /api/me, want 0 and 0", round, live, len(alive), len(held))
		}
	}
	t.Logf("over %d rounds: %d mints answered, %d keys minted, %d keys outlived the deprovisioning",
		keyRaceRounds, tries, minted, survivors)
	if minted == 0 {
		t.Errorf("keys minted: got 0, want some: the minters did not race the deprovisioning")
	}
}
