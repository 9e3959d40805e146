package store_test

import (
	"strings"
	"testing"

	"github.com/terdut-server/terdut-server/internal/store"
)

func TestCheckURL(t *testing.T) {
	const secret = "s3cret-password"
	for _, tc := range []struct {
		name, url string
		want      string // in the error; "" for none
	}{
		{name: "OneHost", url: "postgres://terdut:" + secret + "@db:5432/terdut"},
		{name: "OneHostAny", url: "postgres://terdut@db:5432/terdut?target_session_attrs=any"},
		{name: "Keywords", url: "host=db port=5432 user=terdut dbname=terdut"},
		{name: "HostsReadWrite", url: "postgres://terdut:" + secret + "@h1:5432,h2:5432/terdut?target_session_attrs=read-write"},
		{name: "HostsPrimary", url: "postgres://terdut@h1:5432,h2:5433/terdut?target_session_attrs=primary&sslmode=disable"},
		{name: "HostsKeywords", url: "host=h1,h2 port=5432,5433 user=terdut dbname=terdut target_session_attrs=read-write"},
		{name: "PoolSettings", url: "postgres://terdut@db/terdut?pool_max_conns=8"},
		{name: "ErrHostsWithoutTarget", url: "postgres://terdut:" + secret + "@h1:5432,h2:5432/terdut", want: "lists 2 hosts but not target_session_attrs=read-write"},
		{name: "ErrHostsAny", url: "postgres://terdut@h1,h2,h3/terdut?target_session_attrs=any", want: "lists 3 hosts"},
		{name: "ErrStandby", url: "postgres://terdut:" + secret + "@h1,h2/terdut?target_session_attrs=prefer-standby", want: "may not take writes"},
		{name: "ErrMalformed", url: "postgres://terdut:" + secret + "@[::1/terdut", want: "database URL: the URL is malformed"},
		{name: "ErrPoolSetting", url: "postgres://terdut:" + secret + "@db/terdut?pool_max_conns=many", want: "database URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := store.CheckURL(tc.url)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("got %v, want no error", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			case err != nil && strings.Contains(err.Error(), secret):
				t.Fatalf("the error %q quotes the password", err)
			}
		})
	}
}
