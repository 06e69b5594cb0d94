package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// httpServer serves /metrics, /healthz and /readyz on a registry the
// program owns. It is bound before anything else starts and serves until
// the bridge has stopped: /healthz answers for as long as the process
// lives, through start-up retries and the shutdown flush.
type httpServer struct {
	srv  *http.Server
	ln   net.Listener
	log  *slog.Logger
	done chan error
}

// bindError is a --metrics-addr that cannot be listened on: a usage error
// (exit 2), reported before anything connects.
type bindError struct {
	addr string
	err  error
}

func (e *bindError) Error() string {
	return fmt.Sprintf("--metrics-addr %s: %v: choose a free address with --metrics-addr HOST:PORT, or turn the endpoint off with --metrics-addr ''", e.addr, e.err)
}

func (e *bindError) Unwrap() error { return e.err }

// listenHTTP binds addr and returns the server, not serving yet. /readyz
// answers what ready says: nil is ready, an error why not; its body ends
// with what status says, when it says something (the configuration's
// generation).
func listenHTTP(addr string, reg *prometheus.Registry, ready func(context.Context) error, status func() string, log *slog.Logger, profiling bool) (*httpServer, error) {
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
		more := ""
		if status != nil {
			if more = status(); more != "" {
				more = "\n" + more
			}
		}
		if err := ready(r.Context()); err != nil {
			http.Error(w, "not ready: "+cliMessage(err)+more, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready"+more)
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, &bindError{addr: addr, err: err}
	}
	return &httpServer{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, ln: ln, log: log, done: make(chan error, 1)}, nil
}

// serve starts serving in the background.
func (s *httpServer) serve() {
	s.log.Info("serving /metrics /healthz /readyz", "addr", s.ln.Addr().String())
	go func() { s.done <- s.srv.Serve(s.ln) }()
}

// stop shuts the server down, waiting at most timeout for requests in
// flight.
func (s *httpServer) stop(timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		s.srv.Close()
	}
	if err := <-s.done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		s.log.Warn("metrics server", "error", err.Error())
	}
}
