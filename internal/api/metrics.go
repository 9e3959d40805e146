package api

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/terdut-server/terdut-server/internal/store"
)

// metrics are the server's Prometheus series. Labels are route patterns and fixed reasons,
// never raw paths or anything a client sent.
type metrics struct {
	requests             *prometheus.CounterVec
	durations            *prometheus.HistogramVec
	signins              *prometheus.CounterVec
	signinRefused        *prometheus.CounterVec
	claims               *prometheus.CounterVec
	resets               prometheus.Counter
	operatorAuthFailures prometheus.Counter
	// operatorIdentityRefusals counts service-account tokens refused, by a reason of opjwt.
	operatorIdentityRefusals *prometheus.CounterVec

	// series caches the children of requests and durations by their labels (seriesKey to
	// httpSeries), so that a request updates its two series without hashing its labels and
	// looking them up. Its keys are few and made once, what sync.Map reads without a lock.
	series sync.Map
}

// seriesKey is the labels of a request's series; the status is formatted only when the
// series is first made.
type seriesKey struct {
	route, method string
	status        int
}

// httpSeries is what a request updates: its count and its duration.
type httpSeries struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

func newMetrics(reg prometheus.Registerer, st Store) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "terdut_http_requests_total",
			Help: "HTTP requests by route pattern, method and status."}, []string{"route", "method", "status"}),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "terdut_http_request_duration_seconds",
			Help: "HTTP request durations by route pattern.", Buckets: prometheus.DefBuckets}, []string{"route", "method"}),
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
	}
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
	reg.MustRegister(m.requests, m.durations, m.signins, m.signinRefused, m.claims, m.resets,
		m.operatorAuthFailures, m.operatorIdentityRefusals, state)
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
	hs := m.httpSeries(seriesKey{route: route, method: method, status: status})
	hs.requests.Inc()
	hs.duration.Observe(took.Seconds())
}

// httpSeries returns the series of requests with these labels, making them the first time.
// Their number is bounded as the labels are: route patterns, fixed methods, statuses.
func (m *metrics) httpSeries(k seriesKey) httpSeries {
	if hs, ok := m.series.Load(k); ok {
		return hs.(httpSeries)
	}
	hs, _ := m.series.LoadOrStore(k, httpSeries{requests: m.requests.WithLabelValues(k.route, k.method, strconv.Itoa(k.status)),
		duration: m.durations.WithLabelValues(k.route, k.method)})
	return hs.(httpSeries)
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
