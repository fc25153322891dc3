package telemetry

import (
	"context"
	"log/slog"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Tracing returns the tracer provider for turns' traces and its
// shutdown, which flushes what is left. Traces are exported over OTLP
// when the standard environment names an endpoint
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT),
// over http/protobuf or, if OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL says so,
// grpc; the exporter reads the rest of the OTEL_* settings (headers,
// timeouts, certificates), the SDK its sampler and batching. Otherwise,
// or with OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none, the
// provider does nothing and costs nothing.
func Tracing(ctx context.Context, log *slog.Logger) (trace.TracerProvider, func(context.Context) error, error) {
	off := func(context.Context) error { return nil }
	endpoint := firstEnv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
	if endpoint == "" || strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") || os.Getenv("OTEL_TRACES_EXPORTER") == "none" {
		return noop.NewTracerProvider(), off, nil
	}
	protocol := firstEnv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
	var exp sdktrace.SpanExporter
	var err error
	switch protocol {
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	case "", "http/protobuf":
		protocol = "http/protobuf"
		exp, err = otlptracehttp.New(ctx)
	default:
		log.Warn("OTLP traces: only http/protobuf and grpc are supported; exporting over http/protobuf", "protocol", protocol)
		protocol = "http/protobuf"
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, nil, err
	}
	// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, when set, win.
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", "alicia")), resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		log.Warn("OTLP traces: resource", "err", err) // partial: what was detected is kept
	}
	// The exporter reports failed exports through the global handler,
	// which would otherwise print them with the standard logger.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("OTLP traces", "err", err) }))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	log.Info("exporting turn traces over OTLP", "endpoint", endpoint, "protocol", protocol)
	return tp, tp.Shutdown, nil
}

func firstEnv(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}
