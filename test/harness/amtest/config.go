package amtest

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"
)

// Options are what a test chooses of Alertmanager's configuration: one route to one webhook
// receiver, as an install of terdut-server would configure it.
type Options struct {
	// WebhookURL is where the receiver posts its notifications (required).
	WebhookURL string
	// CredentialsFile, if set, is http_config.authorization.credentials_file: Alertmanager
	// sends "Authorization: Bearer <the file's content>", reading the file on each request.
	CredentialsFile string
	// MaxAlerts is the receiver's max_alerts: alerts beyond it are left out of a notification
	// and counted in its truncatedAlerts (0: no limit).
	MaxAlerts int
	// GroupBy is the route's group_by (default ["alertname"]).
	GroupBy []string
	// GroupWait, GroupInterval and RepeatInterval are the route's (default 1s, 2s and 5s,
	// Alertmanager's 30s, 5m and 4h).
	GroupWait, GroupInterval, RepeatInterval time.Duration
	// ResolveTimeout is global.resolve_timeout: an alert posted without endsAt resolves that
	// long after it was last posted (0: Alertmanager's 5m).
	ResolveTimeout time.Duration
	// Config, if set, is the whole alertmanager.yml, used as it is: a test that proves a
	// configuration written elsewhere (a page of the docs, say) runs that file. It excludes
	// every field above, which would only build another; PeerTimeout still applies.
	Config []byte
	// PeerTimeout is --cluster.peer-timeout, in a cluster only: how long each peer waits, per
	// place in the cluster's order, for an earlier one to notify (default 2s, Alertmanager's
	// 15s).
	PeerTimeout time.Duration
}

// withDefaults fills the options a test left zero.
func (o Options) withDefaults() Options {
	if o.PeerTimeout == 0 {
		o.PeerTimeout = 2 * time.Second
	}
	if o.Config != nil {
		return o // config refuses the fields a whole file excludes: none may be filled here
	}
	if len(o.GroupBy) == 0 {
		o.GroupBy = []string{"alertname"}
	}
	if o.GroupWait == 0 {
		o.GroupWait = time.Second
	}
	if o.GroupInterval == 0 {
		o.GroupInterval = 2 * time.Second
	}
	if o.RepeatInterval == 0 {
		o.RepeatInterval = 5 * time.Second
	}
	return o
}

// receiverName is the one receiver's name, as notifications carry it in "receiver".
const receiverName = "terdut"

// config is alertmanager.yml for o (after withDefaults).
func (o Options) config() ([]byte, error) {
	if o.Config != nil {
		if o.WebhookURL != "" || o.CredentialsFile != "" || o.MaxAlerts != 0 || len(o.GroupBy) != 0 || o.GroupWait != 0 ||
			o.GroupInterval != 0 || o.RepeatInterval != 0 || o.ResolveTimeout != 0 {
			return nil, fmt.Errorf("amtest: Options.Config is a whole alertmanager.yml: leave WebhookURL, CredentialsFile, " +
				"MaxAlerts, GroupBy, the intervals and ResolveTimeout unset beside it (they are its to say)")
		}
		if len(o.Config) == 0 {
			return nil, fmt.Errorf("amtest: Options.Config is empty")
		}
		return o.Config, nil
	}
	if o.WebhookURL == "" {
		return nil, fmt.Errorf("amtest: Options.WebhookURL is required")
	}
	if o.MaxAlerts < 0 {
		return nil, fmt.Errorf("amtest: Options.MaxAlerts is %d, want >= 0", o.MaxAlerts)
	}
	webhook := map[string]any{
		"url":           o.WebhookURL,
		"send_resolved": true,
		"max_alerts":    o.MaxAlerts,
	}
	if o.CredentialsFile != "" {
		webhook["http_config"] = map[string]any{
			"authorization": map[string]any{"type": "Bearer", "credentials_file": o.CredentialsFile},
		}
	}
	global := map[string]any{}
	if o.ResolveTimeout != 0 {
		global["resolve_timeout"] = duration(o.ResolveTimeout)
	}
	return yaml.Marshal(map[string]any{
		"global": global,
		"route": map[string]any{
			"receiver":        receiverName,
			"group_by":        o.GroupBy,
			"group_wait":      duration(o.GroupWait),
			"group_interval":  duration(o.GroupInterval),
			"repeat_interval": duration(o.RepeatInterval),
		},
		"receivers": []any{
			map[string]any{"name": receiverName, "webhook_configs": []any{webhook}},
		},
	})
}

// duration writes d as Prometheus's duration format wants it (no fractions, no "2m0s" with
// a fraction): whole seconds, else milliseconds.
func duration(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return fmt.Sprintf("%dms", d/time.Millisecond)
}
