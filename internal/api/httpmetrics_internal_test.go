package api

import (
	"fmt"
	"math"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
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

// TestHTTPMetrics_Concurrent: many more goroutines than processors observe while another
// gathers and forces GCs, which drop the shard tokens the pool keeps. Every gathered value
// only grows, the totals are the observations' to the last one, and the shard indices in use
// stay at most the pool's bound and are all freed once the tokens are gone.
func TestHTTPMetrics_Concurrent(t *testing.T) {
	// The goroutines observe until there were 20 gathers, each after a GC.
	const goroutines, gathers = 64, 20
	keys := []seriesKey{{"/api/me", "GET", 200}, {"/api/me", "GET", 401}, {"unmatched", "POST", 404}}
	durations := []time.Duration{0, 3 * time.Millisecond, 10 * time.Millisecond, 700 * time.Millisecond, time.Minute}
	// key and duration of goroutine g's round r, which repeat every period rounds
	const period = 15
	key := func(g, r int) seriesKey { return keys[(g+r)%len(keys)] }
	duration := func(g, r int) time.Duration { return durations[(g*7+r)%len(durations)] + time.Duration(g) }

	m := newHTTPMetrics()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	var done atomic.Bool
	var maxIndices, maxTokens int
	scraped := make(chan error, 1)
	go func() {
		defer close(scraped)
		defer done.Store(true)
		last := map[string][]float64{} // values of each series by the last gather
		for range gathers {
			runtime.GC()
			mfs, err := reg.Gather()
			if err != nil {
				scraped <- err
				return
			}
			for _, mf := range mfs {
				for _, s := range mf.GetMetric() {
					id := fmt.Sprint(mf.GetName(), labelValues(s))
					values := []float64{s.GetCounter().GetValue()}
					if h := s.GetHistogram(); h != nil {
						values = []float64{float64(h.GetSampleCount()), h.GetSampleSum()}
						for _, b := range h.GetBucket() {
							values = append(values, float64(b.GetCumulativeCount()))
						}
						if n := len(values); values[n-1] > values[0] {
							scraped <- fmt.Errorf("%s: bucket %v above the count %v", id, values[n-1], values[0])
							return
						}
					}
					for i, v := range last[id] {
						if values[i] < v {
							scraped <- fmt.Errorf("%s: value %d went from %v to %v", id, i, v, values[i])
							return
						}
					}
					last[id] = values
				}
			}
			indices, tokens := m.shards.InUse()
			maxIndices, maxTokens = max(maxIndices, indices), max(maxTokens, tokens)
		}
	}()
	var wg sync.WaitGroup
	var rounds [goroutines]int
	for g := range goroutines {
		wg.Go(func() {
			for ; !done.Load(); rounds[g]++ {
				m.observe(key(g, rounds[g]), duration(g, rounds[g]))
				if rounds[g]%16 == 0 {
					runtime.Gosched() // let the gathers in, among 64 goroutines on few processors
				}
			}
		})
	}
	wg.Wait()
	if err := <-scraped; err != nil {
		t.Fatal(err)
	}
	observations := 0
	for _, n := range rounds {
		observations += n
	}
	t.Logf("%d observations; at most %d shard indices of %d and %d tokens in use",
		observations, maxIndices, m.shards.Len(), maxTokens)
	if maxIndices > m.shards.Len() {
		t.Errorf("%d shard indices in use, more than the bound %d", maxIndices, m.shards.Len())
	}

	type totals struct {
		count   uint64
		nanos   uint64
		buckets []uint64 // cumulative, by prometheus.DefBuckets
	}
	want := map[string]*totals{}
	for g, n := range rounds {
		for r := range period {
			times := uint64(n / period)
			if r < n%period {
				times++
			}
			k, d := key(g, r), duration(g, r)
			id := fmt.Sprint("terdut_http_requests_total", map[string]string{"route": k.route, "method": k.method, "status": strconv.Itoa(k.status)})
			if want[id] == nil {
				want[id] = &totals{}
			}
			want[id].count += times
			id = fmt.Sprint("terdut_http_request_duration_seconds", map[string]string{"route": k.route, "method": k.method})
			if want[id] == nil {
				want[id] = &totals{buckets: make([]uint64, len(prometheus.DefBuckets))}
			}
			want[id].count += times
			want[id].nanos += times * uint64(d)
			for i := sort.SearchFloat64s(prometheus.DefBuckets, d.Seconds()); i < len(prometheus.DefBuckets); i++ {
				want[id].buckets[i] += times
			}
		}
	}
	seen := 0
	for _, mf := range gather(t, m) {
		for _, s := range mf.GetMetric() {
			id := fmt.Sprint(mf.GetName(), labelValues(s))
			w := want[id]
			if w == nil {
				t.Errorf("%s: a series nothing observed", id)
				continue
			}
			seen++
			if h := s.GetHistogram(); h != nil {
				// The sum is the nanoseconds observed, to the last one, in seconds.
				if h.GetSampleCount() != w.count || h.GetSampleSum() != float64(w.nanos)/1e9 {
					t.Errorf("%s: count %d, sum %v, want %d, %v", id, h.GetSampleCount(), h.GetSampleSum(), w.count, float64(w.nanos)/1e9)
				}
				for i, b := range h.GetBucket() {
					if b.GetUpperBound() != prometheus.DefBuckets[i] || b.GetCumulativeCount() != w.buckets[i] {
						t.Errorf("%s: bucket %v: %d, want %v: %d", id, b.GetUpperBound(), b.GetCumulativeCount(), prometheus.DefBuckets[i], w.buckets[i])
					}
				}
			} else if got := s.GetCounter().GetValue(); got != float64(w.count) {
				t.Errorf("%s: %v, want %d", id, got, w.count)
			}
		}
	}
	if seen != len(want) {
		t.Errorf("%d series, want %d", seen, len(want))
	}

	// Two GCs drop the pool's tokens; their cleanups run soon after.
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		indices, tokens := m.shards.InUse()
		if indices == 0 && tokens == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d shard indices and %d tokens still in use with the pool dropped", indices, tokens)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// BenchmarkObserve counts requests of three series from every processor, through the
// collector ("sharded") and through the vectors it replaced ("vec"): the second's adds go to
// lines every core shares. Compare at -cpu 1,2,...; the difference is the cost removed.
func BenchmarkObserve(b *testing.B) {
	keys := []seriesKey{{"unmatched", "GET", 404}, {"/api/me", "GET", 401}, {"/api/me", "GET", 200}}
	for _, bench := range []struct {
		name    string
		observe func(seriesKey, time.Duration)
	}{
		{"sharded", newHTTPMetrics().observe},
		{"vec", newVecMetrics().observe},
	} {
		b.Run(bench.name, func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				for i := 0; pb.Next(); i++ {
					// Mostly one series, as under load on one route; a duration in a low bucket.
					bench.observe(keys[min(i%16, 2)], time.Duration(i%8)*time.Millisecond)
				}
			})
		})
	}
}
