package bridge_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kafka2pg/kafka2pg/bridge"
	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/reader"
	"github.com/kafka2pg/kafka2pg/sinks"
)

// A program that embeds a bridge: the topic orders into the table
// public.orders (its zero-config form: the record's coordinates, key,
// headers and the value as jsonb), metrics and readiness on its own HTTP
// server, and a graceful stop on Ctrl-C within 30 seconds.
func Example() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	reg := prometheus.NewRegistry()
	orders := ingest.Sink{Table: decode.RawTable("public", "orders", decode.ValueJSON), Mapper: decode.RawMapper{Format: decode.ValueJSON}}
	b, err := bridge.New(bridge.Config{
		Kafka:       reader.Config{Brokers: []string{"localhost:9092"}, Group: "orders-pg", Topics: []string{"orders"}},
		Sinks:       sinks.Set{Fixed: map[string]ingest.Sink{"orders": orders}},
		PostgresURL: "postgres://app@localhost:5432/app",
	}, log, reg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}

	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := b.Ready(r.Context()); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	srv := &http.Server{Addr: "127.0.0.1:9187", Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server", "error", err)
		}
	}()
	defer srv.Close() // after the bridge: the probes answer through its stop

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt)
	go func() {
		<-stop
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := b.Shutdown(ctx); err != nil {
			log.Warn("graceful stop cut short", "error", err)
		}
	}()
	if err := b.Run(context.Background()); err != nil {
		log.Error("the bridge stopped", "error", err)
	}
	st := b.Stats()
	fmt.Printf("%d rows written, %d dead letters\n", st.Rows, st.DeadLetters)
}
