// Package telemetrytest receives what the telemetry exports, for tests:
// an OTLP/HTTP trace receiver in process, and the histograms of a
// Prometheus registry.
package telemetrytest

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Receiver is an OTLP/HTTP trace endpoint that keeps the spans exported
// to it.
type Receiver struct {
	URL string

	mu    sync.Mutex
	spans []*tracepb.Span
}

// NewReceiver serves a receiver until the test ends, and points the
// standard OTLP environment of the test at it.
func NewReceiver(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
			http.NotFound(w, req)
			return
		}
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			z, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = z
		}
		b, err := io.ReadAll(body)
		var in coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(b, &in)
		}
		if err != nil {
			t.Errorf("OTLP receiver: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range in.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				r.spans = append(r.spans, ss.Spans...)
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_TRACES_SAMPLER"} {
		t.Setenv(k, "")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	return r
}

// Spans are the spans received so far.
func (r *Receiver) Spans() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...)
}

// Samples counts the samples of each histogram named name, by the value
// of its label label ("" for one without labels).
func Samples(t testing.TB, g prometheus.Gatherer, name, label string) map[string]uint64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			v := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					v = l.GetValue()
				}
			}
			out[v] = m.GetHistogram().GetSampleCount()
		}
	}
	return out
}

// Named are the spans called name.
func Named(spans []*tracepb.Span, name string) []*tracepb.Span {
	var out []*tracepb.Span
	for _, sp := range spans {
		if sp.Name == name {
			out = append(out, sp)
		}
	}
	return out
}

// Attr is a span's attribute key, nil if it has none.
func Attr(sp *tracepb.Span, key string) *commonpb.AnyValue {
	for _, kv := range sp.Attributes {
		if kv.Key == key {
			return kv.Value
		}
	}
	return nil
}

// Children are the names of parent's child spans, sorted; each must lie
// within the parent's trace, start no earlier than it and not end before
// it starts.
func Children(t testing.TB, spans []*tracepb.Span, parent *tracepb.Span) []string {
	t.Helper()
	var out []string
	for _, sp := range spans {
		if !bytes.Equal(sp.ParentSpanId, parent.SpanId) {
			continue
		}
		if !bytes.Equal(sp.TraceId, parent.TraceId) || sp.StartTimeUnixNano < parent.StartTimeUnixNano || sp.EndTimeUnixNano < sp.StartTimeUnixNano {
			t.Errorf("span %s (%d to %d) in a parent from %d", sp.Name, sp.StartTimeUnixNano, sp.EndTimeUnixNano, parent.StartTimeUnixNano)
		}
		out = append(out, sp.Name)
	}
	slices.Sort(out)
	return out
}
