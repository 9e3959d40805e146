package api_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// TestSchedule_ReplicasAssignOverlappingWeeks: round after round, alice's week and bob's,
// which share four days, are assigned at once through two replicas. No day is ever held twice,
// and each assignment is applied whole or refused whole: without replace, one is 201 and the
// other 409 naming the four days; with an admin's replace, both are 201 and the four days are
// all the later one's; with the members' own replace, one is 201 and the other 403.
func TestSchedule_ReplicasAssignOverlappingWeeks(t *testing.T) {
	dbURL := pgtest.MustDatabase(t)
	replicas := []*apitest.Server{apitest.NewServer(t, dbURL, nil), apitest.NewServer(t, dbURL, nil)}
	admin := replicas[0].MustClaim(t)
	alice := apitest.MustPerson(t, replicas[0].Store, "alice", store.RoleMember)
	bob := apitest.MustPerson(t, replicas[0].Store, "bob", store.RoleMember)
	people := []apitest.Person{alice, bob}
	tally := map[string]int{}
	for round := range 30 {
		first := time.Date(2031, 1, 1+14*round, 0, 0, 0, 0, time.UTC)
		week := func(offset int) []string {
			var out []string
			for i := range 7 {
				out = append(out, first.AddDate(0, 0, offset+i).Format(store.DateLayout))
			}
			return out
		}
		weeks := [][]string{week(0), week(3)}
		shared := weeks[1][:4]
		mode := []string{"admin", "admin-replace", "members-replace"}[round%3]
		var resps [2]apitest.Response
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range 2 {
			key := admin
			if mode == "members-replace" {
				key = people[i].APIKey
			}
			req := apitest.Request{Method: http.MethodPost, Path: "/api/schedule", Bearer: key,
				Body: assignment(people[i].User.ID, mode != "admin", weeks[i]...)}
			wg.Go(func() {
				<-start
				var err error
				if resps[i], err = replicas[i].Do(req); err != nil {
					t.Errorf("round %d: %v", round, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}

		// Who holds each day of the two weeks, and in which order the answers say they came.
		resp := replicas[round%2].MustDo(t, apitest.Request{Method: http.MethodGet, Bearer: admin,
			Path: fmt.Sprintf("/api/schedule?from=%s&to=%s", weeks[0][0], weeks[1][6])})
		held := map[string]string{}
		for _, e := range decodeEntries(t, "list", resp.Body) {
			if held[e.Date] != "" {
				t.Fatalf("round %d: %s held twice", round, e.Date)
			}
			held[e.Date] = e.Username
		}
		holds := func(p int, days []string) bool {
			for _, d := range days {
				if held[d] != people[p].User.Username {
					return false
				}
			}
			return true
		}
		holdsNone := func(days []string) bool {
			return !slices.ContainsFunc(days, func(d string) bool { return held[d] != "" })
		}
		statuses := [2]int{resps[0].Status, resps[1].Status}
		won := slices.Index(statuses[:], http.StatusCreated)
		lost := 1 - won
		switch mode {
		case "admin", "members-replace":
			refusal := map[string]int{"admin": http.StatusConflict, "members-replace": http.StatusForbidden}[mode]
			if won < 0 || statuses[lost] != refusal {
				t.Fatalf("round %d (%s): got %v, want one 201 and one %d", round, mode, statuses, refusal)
			}
			if !holds(won, weeks[won]) || !holdsNone(slices.DeleteFunc(slices.Clone(weeks[lost]), func(d string) bool { return slices.Contains(shared, d) })) {
				t.Fatalf("round %d (%s): got %v, want %s's week whole and nothing else of %s's", round, mode, held,
					people[won].User.Username, people[lost].User.Username)
			}
			if mode == "admin" && resps[lost].Code() != "dates_held" {
				t.Fatalf("round %d: the refusal %s, want dates_held", round, resps[lost].Body)
			}
			for _, d := range shared {
				if mode == "admin" && !strings.Contains(string(resps[lost].Body), d+" ("+people[won].User.Username+")") {
					t.Fatalf("round %d: the refusal %s does not name %s as %s's", round, resps[lost].Body, d, people[won].User.Username)
				}
			}
			tally[mode+" won by "+people[won].User.Username]++
		case "admin-replace":
			if statuses != [2]int{http.StatusCreated, http.StatusCreated} {
				t.Fatalf("round %d (%s): got %v, want both 201", round, mode, statuses)
			}
			later := 0
			if holds(1, shared) {
				later = 1
			}
			if !holds(0, weeks[0][:3]) || !holds(1, weeks[1][4:]) || !holds(later, shared) {
				t.Fatalf("round %d (%s): got %v, want each week whole, the shared days all one person's", round, mode, held)
			}
			tally[mode+" last by "+people[later].User.Username]++
		}
	}
	t.Logf("outcomes: %v", tally)
}
