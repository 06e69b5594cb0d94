package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kafka2pg/kafka2pg/reader"
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

// listenHTTP binds addr and returns the server, not serving yet. stall is
// --ready-stall-timeout.
func listenHTTP(addr string, reg *prometheus.Registry, st *bridgeStatus, stall time.Duration, log *slog.Logger, profiling bool) (*httpServer, error) {
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
		if why := notReady(r.Context(), st, stall, time.Now()); why != "" {
			http.Error(w, "not ready: "+why, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
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

// notReady says why the bridge is not ready, or "" when it is: starting
// or stopping; Postgres unreachable; a partition stopped, in retry
// backoff, or stalled (lag, and no write committed for stall); not yet in
// the group.
// readyPingTimeout bounds /readyz's ping of Postgres: under Kubernetes'
// default probe timeout of one second.
const readyPingTimeout = 500 * time.Millisecond

func notReady(ctx context.Context, st *bridgeStatus, stall time.Duration, now time.Time) string {
	ph, step, rd, pool := st.snapshot()
	switch ph {
	case phaseStarting:
		return "starting: " + step + troubleSuffix(st)
	case phaseStopping:
		return "stopping: flushing, committing and leaving the group"
	}
	stats := rd.Stats()
	if len(stats.Stopped) > 0 {
		return strings.Join(stats.Stopped, "; ")
	}
	if stats.Halted > 0 {
		return fmt.Sprintf("%d partition(s) in retry backoff after failed writes: %s", stats.Halted, strings.Join(rd.Trouble(), "; "))
	}
	select {
	case <-rd.Settled():
	default:
		return "not yet in the consumer group"
	}
	if stall > 0 {
		if stalled := stalledPartitions(rd.Partitions(), now, stall); len(stalled) > 0 {
			return strings.Join(stalled, "; ")
		}
	}
	// Last, and briefly: a probe gives up after a second or so, and an
	// answer that comes too late reads as no answer. A server that accepts
	// connections but answers nothing (frozen, or a hung pooler) fails here
	// as it fails the writes.
	ctx, cancel := context.WithTimeout(ctx, readyPingTimeout)
	defer cancel()
	if err := pool.Ping(ctx); err != nil {
		return "postgres unreachable: " + redactErr(err).Error()
	}
	return ""
}

func troubleSuffix(st *bridgeStatus) string {
	if s := st.startTrouble.State(); s.Failing {
		return fmt.Sprintf(" (failing for %s: %v)", time.Since(s.FailingSince).Round(time.Second), redactErr(s.LastErr))
	}
	return ""
}

// stalledPartitions describes each partition that has lag but committed no
// write (nor was claimed) for stall or longer, or whose write has been in
// flight for stall or longer, in topic and partition order.
func stalledPartitions(parts []reader.PartitionStats, now time.Time, stall time.Duration) []string {
	sort.Slice(parts, func(i, j int) bool {
		if parts[i].Topic != parts[j].Topic {
			return parts[i].Topic < parts[j].Topic
		}
		return parts[i].Partition < parts[j].Partition
	})
	var out []string
	for _, p := range parts {
		idle := now.Sub(p.LastCommit)
		// A write in flight for stall is stuck whatever the lag says.
		stuck := !p.WritingSince.IsZero() && now.Sub(p.WritingSince) >= stall
		if !stuck && (p.Lag() <= 0 || idle < stall) {
			continue
		}
		why := fmt.Sprintf("partition %s/%d has %d records of lag and committed no write for %s", p.Topic, p.Partition, p.Lag(), idle.Round(time.Second))
		var detail []string
		if !p.WritingSince.IsZero() {
			detail = append(detail, fmt.Sprintf("a write in flight for %s", now.Sub(p.WritingSince).Round(time.Second)))
		}
		if p.Failures > 0 {
			detail = append(detail, fmt.Sprintf("%d failed writes or claims in a row", p.Failures))
		}
		if len(detail) > 0 {
			why += " (" + strings.Join(detail, ", ") + ")"
		}
		out = append(out, why)
	}
	return out
}
