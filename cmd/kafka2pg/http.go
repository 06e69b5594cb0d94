package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kafka2pg/kafka2pg/reader"
)

// httpServer serves /metrics, /healthz and /readyz on a registry the
// program owns.
type httpServer struct {
	srv *http.Server
	ln  net.Listener
	log *slog.Logger
}

func newHTTPServer(addr string, reg *prometheus.Registry, rd *reader.Reader, pool *pgxpool.Pool, log *slog.Logger, profiling bool) (*httpServer, error) {
	mux := http.NewServeMux()
	if profiling {
		// Go's profiler (go tool pprof http://ADDR/debug/pprof/heap):
		// where the CPU and the memory go, on the running bridge.
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := pool.Ping(ctx); err != nil {
			http.Error(w, "not ready: postgres unreachable: "+redactErr(err).Error(), http.StatusServiceUnavailable)
			return
		}
		st := rd.Stats()
		if st.Halted > 0 {
			http.Error(w, fmt.Sprintf("not ready: %d partition(s) in retry backoff after failed writes", st.Halted), http.StatusServiceUnavailable)
			return
		}
		if len(st.Stopped) > 0 {
			http.Error(w, "not ready: "+strings.Join(st.Stopped, "; "), http.StatusServiceUnavailable)
			return
		}
		select {
		case <-rd.Settled():
		default:
			http.Error(w, "not ready: not yet in the consumer group", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr %s: %w", addr, err)
	}
	return &httpServer{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, ln: ln, log: log}, nil
}

func (s *httpServer) serve(ctx context.Context) error {
	s.log.Info("serving /metrics /healthz /readyz", "addr", s.ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = s.srv.Shutdown(sctx)
		<-errc
		return nil
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("metrics server: %w", err)
	}
}
