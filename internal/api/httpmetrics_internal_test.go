package api

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

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
