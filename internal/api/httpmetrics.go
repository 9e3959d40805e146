package api

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/terdut-server/terdut-server/internal/shard"
)

// httpMetrics collects terdut_http_requests_total and terdut_http_request_duration_seconds,
// which every request updates. They were a CounterVec and a HistogramVec, whose series are
// counts every core adds to: on two cores under load their cache lines went back and forth
// between the cores, 1.5-2 µs of CPU a request. Here a series keeps its counts in shards, one
// for each shard index, and a request adds to the shard of the index it holds: an index stays
// with a processor (see internal/shard), so a request's adds touch lines no other core writes.
// Collect sums the shards and emits what the two vectors did, the same families, labels,
// buckets and created timestamps: dashboards and alerts read them.
type httpMetrics struct {
	requests, durations *prometheus.Desc
	shards              *shard.Pool

	// series is the series of a request by its labels (seriesKey to httpSeries). A request
	// reads it without a lock and writes nothing; the first request of a series makes it
	// under mu.
	series sync.Map
	mu     sync.Mutex
	// durationSeries is the histogram of each route and method (under mu): the series of all
	// statuses share it, as they shared the HistogramVec's child.
	durationSeries map[[2]string]*durationHistogram
}

// seriesKey is the labels of a request's series; the status is formatted only when the
// series is first made.
type seriesKey struct {
	route, method string
	status        int
}

// httpSeries is what a request updates: its count and its duration.
type httpSeries struct {
	requests *requestCounter
	duration *durationHistogram
}

func newHTTPMetrics() *httpMetrics {
	return &httpMetrics{
		requests: prometheus.NewDesc("terdut_http_requests_total",
			"HTTP requests by route pattern, method and status.", []string{"route", "method", "status"}, nil),
		durations: prometheus.NewDesc("terdut_http_request_duration_seconds",
			"HTTP request durations by route pattern.", []string{"route", "method"}, nil),
		shards:         shard.NewPool(shard.PerProcessor()),
		durationSeries: map[[2]string]*durationHistogram{},
	}
}

// observe counts a request, with labels already bounded (see metrics.observe), and its
// duration.
func (m *httpMetrics) observe(k seriesKey, took time.Duration) {
	hs := m.httpSeries(k)
	t := m.shards.Get()
	hs.requests.shards.at(t.Index()).n.Add(1)
	d := hs.duration.shards.at(t.Index())
	d.buckets[durationBucket(took)].Add(1)
	d.sum.Add(uint64(max(took, 0)))
	m.shards.Put(t)
}

// httpSeries returns the series of requests with these labels, making them the first time.
// Their number is bounded as the labels are: route patterns, fixed methods, statuses.
func (m *httpMetrics) httpSeries(k seriesKey) httpSeries {
	if hs, ok := m.series.Load(k); ok {
		return hs.(httpSeries)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if hs, ok := m.series.Load(k); ok {
		return hs.(httpSeries)
	}
	now := time.Now()
	d := m.durationSeries[[2]string{k.route, k.method}]
	if d == nil {
		d = &durationHistogram{labels: []string{k.route, k.method}, created: now, shards: make(shards[histogramShard], m.shards.Len())}
		m.durationSeries[[2]string{k.route, k.method}] = d
	}
	hs := httpSeries{duration: d,
		requests: &requestCounter{labels: []string{k.route, k.method, strconv.Itoa(k.status)}, created: now, shards: make(shards[counterShard], m.shards.Len())}}
	m.series.Store(k, hs)
	return hs
}

func (m *httpMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.requests
	ch <- m.durations
}

func (m *httpMetrics) Collect(ch chan<- prometheus.Metric) {
	m.series.Range(func(_, hs any) bool {
		ch <- hs.(httpSeries).requests.metric(m.requests)
		return true
	})
	m.mu.Lock()
	durations := make([]*durationHistogram, 0, len(m.durationSeries))
	for _, d := range m.durationSeries {
		durations = append(durations, d)
	}
	m.mu.Unlock()
	for _, d := range durations {
		ch <- d.metric(m.durations)
	}
}

// shardBytes is what a shard of a series takes: two cache lines, as a processor may fetch a
// line's neighbour with it. Like sync.Pool's per-P locals, a shard is a multiple of it in
// size; made alone it is a 128-byte object, which Go's allocator places at a multiple of 128.
const shardBytes = 128

// shards are a series' counts by shard index, each made the first time a request with that
// index counts in the series: a series few requests reach keeps few.
type shards[T any] []atomic.Pointer[T]

func (s shards[T]) at(i int) *T {
	if p := s[i].Load(); p != nil {
		return p
	}
	s[i].CompareAndSwap(nil, new(T))
	return s[i].Load()
}

// requestCounter is a series of terdut_http_requests_total.
type requestCounter struct {
	labels  []string // route, method, status
	created time.Time
	shards  shards[counterShard]
}

type counterShard struct {
	n atomic.Uint64
	_ [shardBytes - 8]byte
}

func (c *requestCounter) metric(desc *prometheus.Desc) prometheus.Metric {
	var n uint64
	for i := range c.shards {
		if s := c.shards[i].Load(); s != nil {
			n += s.n.Load()
		}
	}
	m, err := prometheus.NewConstMetricWithCreatedTimestamp(desc, prometheus.CounterValue, float64(n), c.created, c.labels...)
	if err != nil {
		return prometheus.NewInvalidMetric(desc, err)
	}
	return m
}

// durationBounds are the histogram's bucket bounds in seconds, prometheus.DefBuckets, which
// the HistogramVec had (TestHTTPMetrics_SameAsVecs checks they still are). An array, so that
// a shard's buckets are one too.
var durationBounds = [...]float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// durationBucket returns the bucket of a duration: the first whose bound is not below it in
// seconds, as the HistogramVec found it, or the last, +Inf.
func durationBucket(took time.Duration) int {
	v := took.Seconds()
	for i, b := range durationBounds {
		if v <= b {
			return i
		}
	}
	return len(durationBounds)
}

// durationHistogram is a series of terdut_http_request_duration_seconds.
type durationHistogram struct {
	labels  []string // route, method
	created time.Time
	shards  shards[histogramShard]

	// The shards' sums add up to the nanoseconds observed modulo 2^64: a uint64 wraps after 584
	// years of requests, seven months of a thousand at a time. A scrape counts the wraps by
	// the sum's going down since the last one: never more than one in between.
	collecting     sync.Mutex
	lastSum, wraps uint64
}

// histogramCounts are a shard's observations. buckets[i] counts those in bucket i alone, the
// last +Inf: an observation adds to one bucket, and the count is their sum, so that a scrape
// never sees a bucket above the count. The sum is in nanoseconds, an integer, which adds up
// exactly (the HistogramVec's float did not), read as seconds. A duration is never negative
// (time.Since reads the monotonic clock); one that were would add 0, not wrap the sum.
type histogramCounts struct {
	buckets [len(durationBounds) + 1]atomic.Uint64
	sum     atomic.Uint64
}

type histogramShard struct {
	histogramCounts
	_ [shardBytes - unsafe.Sizeof(histogramCounts{})%shardBytes]byte
}

func (h *durationHistogram) metric(desc *prometheus.Desc) prometheus.Metric {
	var counts [len(durationBounds) + 1]uint64
	var sum uint64
	h.collecting.Lock()
	for i := range h.shards {
		if s := h.shards[i].Load(); s != nil {
			for b := range counts {
				counts[b] += s.buckets[b].Load()
			}
			sum += s.sum.Load()
		}
	}
	if sum < h.lastSum {
		h.wraps++
	}
	h.lastSum = sum
	seconds := (float64(h.wraps)*(1<<64) + float64(sum)) / 1e9
	h.collecting.Unlock()
	cumulative := make(map[float64]uint64, len(durationBounds))
	var n uint64
	for b, bound := range durationBounds {
		n += counts[b]
		cumulative[bound] = n
	}
	n += counts[len(durationBounds)]
	m, err := prometheus.NewConstHistogramWithCreatedTimestamp(desc, n, seconds, cumulative, h.created, h.labels...)
	if err != nil {
		return prometheus.NewInvalidMetric(desc, err)
	}
	return m
}
