package store_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/terdut-server/terdut-server/internal/store"
)

func TestWithCredentials(t *testing.T) {
	const secret = "s3cr:t/@?"
	tests := []struct {
		name, url, user, password, want string
		err                             error
	}{
		{name: "UserAndPassword", url: "postgres://db:5432/terdut?sslmode=require", user: "app", password: secret,
			want: "postgres://app:s3cr%3At%2F%40%3F@db:5432/terdut?sslmode=require"},
		{name: "PasswordKeepsUser", url: "postgresql://terdut@db/terdut", password: "pw", want: "postgresql://terdut:pw@db/terdut"},
		{name: "UserKeepsPassword", url: "postgres://a:pw@db/terdut", user: "b", want: "postgres://b:pw@db/terdut"},
		{name: "SeveralHosts", url: "postgres://db-0:5432,db-1:5432/terdut?target_session_attrs=read-write", user: "app", password: "pw",
			want: "postgres://app:pw@db-0:5432,db-1:5432/terdut?target_session_attrs=read-write"},
		{name: "ErrURLHasPassword", url: "postgres://a:urlpw@db/terdut", password: "pw", err: store.ErrURLHasPassword},
		{name: "ErrURLHasQueryPassword", url: "postgres://a@db/terdut?password=urlpw", password: "pw", err: store.ErrURLHasPassword},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := store.WithCredentials(tt.url, tt.user, tt.password)
			if got != tt.want || !errors.Is(err, tt.err) {
				t.Errorf("got %q, %v; want %q, %v", got, err, tt.want, tt.err)
			}
			if got != "" {
				if err := store.CheckURL(got); err != nil {
					t.Errorf("CheckURL(%q): %v, want the URL accepted", got, err)
				}
			}
		})
	}
	for _, bad := range []string{"host=db user=terdut password=" + secret, "mysql://db/terdut", "postgres://a:" + secret + "@[::1/terdut"} {
		_, err := store.WithCredentials(bad, "app", "pw")
		if err == nil || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "postgres://[user@]host:port/dbname") {
			t.Errorf("got %v for a URL that is no postgres:// URL, want an error that names the form and not the password", err)
		}
	}
}
