package api

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/terdut-server/terdut-server/internal/store"
)

// metrics are the server's Prometheus series. Labels are route patterns and fixed reasons,
// never raw paths or anything a client sent.
type metrics struct {
	http                 *httpMetrics // terdut_http_requests_total and terdut_http_request_duration_seconds
	signins              *prometheus.CounterVec
	signinRefused        *prometheus.CounterVec
	claims               *prometheus.CounterVec
	resets               prometheus.Counter
	operatorAuthFailures prometheus.Counter
	// operatorIdentityRefusals counts service-account tokens refused, by a reason of opjwt.
	operatorIdentityRefusals *prometheus.CounterVec
	// webhookNotifications counts Alertmanager's deliveries by outcome, webhookAlerts the
	// alerts of those stored by what they did, webhookDuration how long each took.
	webhookNotifications *prometheus.CounterVec
	webhookAlerts        *prometheus.CounterVec
	webhookDuration      prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer, st Store) *metrics {
	m := &metrics{
		http: newHTTPMetrics(),
		signins: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "terdut_signins_total",
			Help: "Successful sign-ins by method."}, []string{"method"}),
		signinRefused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "terdut_signins_refused_total",
			Help: "Refused sign-ins by method and reason."}, []string{"method", "reason"}),
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "terdut_bootstrap_claims_total",
			Help: "Bootstrap claims by outcome."}, []string{"outcome"}),
		resets: prometheus.NewCounter(prometheus.CounterOpts{Name: "terdut_bootstrap_resets_total",
			Help: "Bootstrap resets over the API."}),
		operatorAuthFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "terdut_operator_token_failures_total",
			Help: "Requests to operator endpoints with a missing or wrong operator token."}),
		operatorIdentityRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "terdut_operator_identity_refusals_total",
			Help: "Operator service-account tokens refused, by reason."}, []string{"reason"}),
		webhookNotifications: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "terdut_webhook_notifications_total",
			Help: "Alertmanager's notifications received, by outcome."}, []string{"outcome"}),
		webhookAlerts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "terdut_webhook_alerts_total",
			Help: "Alerts of stored notifications, by what each did."}, []string{"outcome"}),
		webhookDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "terdut_webhook_duration_seconds",
			Help: "How long a notification took to receive and store.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 12)}),
	}
	for _, outcome := range []string{"stored", "unauthorized", "invalid", "too_large", "unavailable", "canceled", "error"} {
		m.webhookNotifications.WithLabelValues(outcome)
	}
	open := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "terdut_incidents_open",
		Help: "Open incidents (triggered or acknowledged), -1 when the database cannot be read."},
		func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			n, err := st.OpenIncidents(ctx)
			if err != nil {
				return -1
			}
			return float64(n)
		})
	state := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "terdut_bootstrap_pending",
		Help: "1 while the install is unclaimed, 0 once claimed, -1 when the database cannot be read."},
		func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			b, err := st.Bootstrap(ctx)
			switch {
			case err != nil:
				return -1
			case b.State == store.StatePending:
				return 1
			}
			return 0
		})
	reg.MustRegister(m.http, m.signins, m.signinRefused, m.claims, m.resets,
		m.operatorAuthFailures, m.operatorIdentityRefusals, state, m.webhookNotifications, m.webhookAlerts,
		m.webhookDuration, open)
	return m
}

// observe counts and times a request under its chi route pattern ("" when no route
// matched).
func (m *metrics) observe(route, method string, status int, took time.Duration) {
	if route == "" {
		route = "unmatched"
	}
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodOptions:
	default:
		method = "other"
	}
	m.http.observe(seriesKey{route: route, method: method, status: status}, took)
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
