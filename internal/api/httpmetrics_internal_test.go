package api

import (
	"math"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

// vecMetrics are the two request families as a CounterVec and a HistogramVec with a cache of
// their children, what the metrics had before httpMetrics: the reference it must match, and
// the path it is measured against.
type vecMetrics struct {
	requests  *prometheus.CounterVec
	durations *prometheus.HistogramVec
	series    sync.Map // seriesKey to vecSeries
}

type vecSeries struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

func newVecMetrics() *vecMetrics {
	return &vecMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "terdut_http_requests_total",
			Help: "HTTP requests by route pattern, method and status."}, []string{"route", "method", "status"}),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "terdut_http_request_duration_seconds",
			Help: "HTTP request durations by route pattern.", Buckets: prometheus.DefBuckets}, []string{"route", "method"}),
	}
}

func (m *vecMetrics) observe(k seriesKey, took time.Duration) {
	hs, ok := m.series.Load(k)
	if !ok {
		hs, _ = m.series.LoadOrStore(k, vecSeries{requests: m.requests.WithLabelValues(k.route, k.method, strconv.Itoa(k.status)),
			duration: m.durations.WithLabelValues(k.route, k.method)})
	}
	hs.(vecSeries).requests.Inc()
	hs.(vecSeries).duration.Observe(took.Seconds())
}

// gather returns the families of the collectors, gathered from a registry of their own.
func gather(t testing.TB, cs ...prometheus.Collector) []*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(cs...)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

// requestCount returns the value of terdut_http_requests_total with these labels, or -1
// when m has no such series.
func requestCount(t testing.TB, m *httpMetrics, route, method, status string) float64 {
	t.Helper()
	for _, mf := range gather(t, m) {
		if mf.GetName() != "terdut_http_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labels := labelValues(m); labels["route"] == route && labels["method"] == method && labels["status"] == status {
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1
}

func labelValues(m *dto.Metric) map[string]string {
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	return labels
}

// TestHTTPMetrics_SameAsVecs: the collector and the CounterVec and HistogramVec it replaced,
// given the same requests, gather to the same families: names, help, types, labels, counts,
// buckets and their bounds, created timestamps set. Only the sums may differ, by float
// rounding, as the vectors add floats in seconds. The durations include 0, every bucket bound
// and a nanosecond either side of it, and hours; each series is observed by a goroutine of its
// own.
func TestHTTPMetrics_SameAsVecs(t *testing.T) {
	durations := []time.Duration{0, 1, 7 * time.Millisecond, 333 * time.Millisecond, time.Hour, 1000 * time.Hour}
	for _, b := range prometheus.DefBuckets {
		d := time.Duration(math.Round(b * 1e9))
		if d.Seconds() != b {
			t.Fatalf("bound %v is not %v in seconds", b, d)
		}
		durations = append(durations, d-1, d, d+1)
	}
	keys := []seriesKey{
		{"/api/me", "GET", 200}, {"/api/me", "GET", 401}, {"/api/me", "HEAD", 200},
		{"/api/users/{id}", "PATCH", 200}, {"/api/users/{id}", "PATCH", 404}, {"/api/users/{id}", "DELETE", 204},
		{"unmatched", "GET", 404}, {"unmatched", "other", 405}, {"/auth/oidc/login", "GET", 503},
	}
	start := time.Now()
	got, want := newHTTPMetrics(), newVecMetrics()
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Go(func() { // on several processors, so in several shards
			for j, d := range durations {
				if (i+j)%3 == 0 { // each series its own share of the durations
					continue
				}
				for range 1 + (i+j)%4 {
					got.observe(k, d)
					want.observe(k, d)
				}
			}
		})
	}
	wg.Wait()

	gotFamilies, wantFamilies := gather(t, got), gather(t, want.requests, want.durations)
	if len(gotFamilies) != 2 || len(wantFamilies) != 2 {
		t.Fatalf("%d families, want %d (2)", len(gotFamilies), len(wantFamilies))
	}
	for f := range wantFamilies {
		g, w := gotFamilies[f], wantFamilies[f]
		if len(g.GetMetric()) != len(w.GetMetric()) {
			t.Fatalf("%s: %d series, want %d", w.GetName(), len(g.GetMetric()), len(w.GetMetric()))
		}
		for i := range w.GetMetric() {
			gm, wm := g.GetMetric()[i], w.GetMetric()[i]
			// The series were made at different instants, both with the first observation.
			created := gm.GetCounter().GetCreatedTimestamp()
			if gm.Histogram != nil {
				created = gm.Histogram.GetCreatedTimestamp()
			}
			if ct := created.AsTime(); created == nil || ct.Before(start) || ct.After(time.Now()) {
				t.Errorf("%s %v: created %v, not while observing", g.GetName(), labelValues(gm), created)
			}
			for _, m := range []*dto.Metric{gm, wm} {
				if m.Counter != nil {
					m.Counter.CreatedTimestamp = nil
				}
				if m.Histogram != nil {
					m.Histogram.CreatedTimestamp = nil
				}
			}
			if wm.Histogram != nil && gm.Histogram != nil {
				gs, ws := gm.Histogram.GetSampleSum(), wm.Histogram.GetSampleSum()
				if math.Abs(gs-ws) > 1e-9*math.Abs(ws) {
					t.Errorf("%s %v: sum %v, want %v", g.GetName(), labelValues(gm), gs, ws)
				}
				gm.Histogram.SampleSum = wm.Histogram.SampleSum
			}
		}
		if !proto.Equal(g, w) {
			t.Errorf("families differ:\ngot  %v\nwant %v", g, w)
		}
	}
}

// TestHTTPMetrics_SumPastUint64: a histogram's sum in seconds goes on past 2^64 ns, where its
// shards' sum wraps: a scrape before and one after.
func TestHTTPMetrics_SumPastUint64(t *testing.T) {
	m := newHTTPMetrics()
	k := seriesKey{"/api/me", "GET", 200}
	m.observe(k, math.MaxInt64)
	m.observe(k, math.MaxInt64-time.Second)
	sum := func() float64 {
		for _, mf := range gather(t, m) {
			if mf.GetName() == "terdut_http_request_duration_seconds" {
				return mf.GetMetric()[0].GetHistogram().GetSampleSum()
			}
		}
		t.Fatal("no histogram")
		return 0
	}
	if got, want := sum(), (2*float64(math.MaxInt64)-1e9)/1e9; got != want {
		t.Fatalf("sum %v, want %v", got, want)
	}
	m.observe(k, 3*time.Second)
	if got, want := sum(), (2*float64(math.MaxInt64)+2e9)/1e9; got != want {
		t.Fatalf("sum past 2^64 ns: %v, want %v", got, want)
	}
}
