package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kafka2pg/kafka2pg/tools/internal/livebridge"
	"github.com/kafka2pg/kafka2pg/tools/internal/procfs"
)

// scrapeInterval is how often the bench looks at the bridge's progress:
// the resolution of its first fetch and last commit times in the
// throughput scenarios.
const scrapeInterval = 50 * time.Millisecond

// bridgeProc is the built binary running as a child of the bench, with
// default flags but for the group, the metrics address and the sink.
type bridgeProc struct {
	cmd    *exec.Cmd
	log    livebridge.LogBuffer
	url    string // of /metrics
	group  string
	exited chan error // receives cmd.Wait's error once
	once   sync.Once  // of stop
	client *http.Client
	peak   int64 // VmHWM seen so far, bytes
	// The CPU counters when it started: see finish.
	t0                 time.Time
	oth0, pg0, broker0 float64
}

// startBridge starts the bridge on topic into the table of kind.
func startBridge(ctx context.Context, e *env, kind, topic string) (*bridgeProc, error) {
	addr, err := livebridge.FreeAddr()
	if err != nil {
		return nil, err
	}
	b := &bridgeProc{url: "http://" + addr + "/metrics", group: "kafka2pg-bench-" + topic, exited: make(chan error, 1),
		client: &http.Client{Timeout: 2 * time.Second}}
	args := []string{"run", "--kafka-brokers", strings.Join(e.kafka.brokers, ","), "--kafka-group", b.group,
		"--pg-url", e.pgURL, "--metrics-addr", addr, "--log-level", "warn"}
	if e.profileDir != "" {
		args = append(args, "--pprof")
	}
	if kind == typedTable || kind == upsertTable {
		cfg := filepath.Join(e.tmp, topic+".yaml")
		if err := os.WriteFile(cfg, []byte(configYAML(topic, kind)), 0o600); err != nil {
			return nil, err
		}
		args = append(args, "--config", cfg)
	} else {
		args = append(args, "--topic", topic, "--pg-table", kind, "--pg-schema", "public")
	}
	b.cmd = exec.CommandContext(ctx, e.bin, args...)
	b.cmd.Env = livebridge.Env(os.Environ())
	b.cmd.Stdout, b.cmd.Stderr = &b.log, &b.log
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	b.oth0, b.pg0, b.broker0, b.t0 = e.othersCPU(), e.pg.CPU(), e.brokerCPU(), time.Now()
	if err := b.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", e.bin, err)
	}
	go func() { b.exited <- b.cmd.Wait() }()
	return b, nil
}

// pollRSS updates the peak with the child's VmHWM. Polled, because its
// ru_maxrss would count this process's memory, shared with the child
// between fork and exec.
func (b *bridgeProc) pollRSS() { b.peak = max(b.peak, procfs.PeakRSS(b.cmd.Process.Pid)) }

// scrape reads /metrics; an error means the bridge is not listening yet.
func (b *bridgeProc) scrape(ctx context.Context) (string, error) {
	return livebridge.Get(ctx, b.client, b.url)
}

// stop sends SIGTERM and waits for the bridge to exit (30 s, then SIGKILL);
// calls after the first return at once.
func (b *bridgeProc) stop() {
	b.once.Do(func() {
		_ = b.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-b.exited:
		case <-time.After(30 * time.Second):
			_ = b.cmd.Process.Kill()
			<-b.exited
		}
	})
}

// finish stops the bridge and fills r's CPU and memory figures: the child's
// rusage over its whole life, Postgres' CPU and other processes' since
// start.
func (b *bridgeProc) finish(e *env, r *result) {
	b.pollRSS()
	b.stop()
	pgCPU, oth, end := e.pg.CPU()-b.pg0, e.othersCPU()-b.oth0, time.Now()
	r.PGCPU, r.PeakRSS, r.ClientCPU, r.OthersCores = pgCPU, b.peak, math.NaN(), math.NaN()
	r.BrokerCPU = e.brokerCPU() - b.broker0
	if ru, ok := b.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.ClientCPU = (tv(ru.Utime) + tv(ru.Stime)).Seconds()
		r.OthersCores = (oth - r.ClientCPU) / end.Sub(b.t0).Seconds()
	}
}

// runBridge runs the built binary on topic, which holds n records, until
// they are all committed; then it reads the latency histogram, stops the
// bridge with SIGTERM and counts the table (with keys, the stream of an
// upsert run, checks that it holds the last record of every id).
//
// Until the bridge fetches its first record the bench reads /metrics;
// from then on it reads the durable offsets in Postgres (a query on a few
// rows), because a scrape every 50 ms, gathered and gzipped, cost the
// bridge some 7% of its CPU in the zero-config drain's profile, which a
// Prometheus scraping every 15 s never would. A commit is visible there
// when it happens; the histogram is read from one scrape at the end.
func runBridge(ctx context.Context, e *env, kind, topic string, n int, keys keyMode) (result, error) {
	t, _, err := tableFor(kind)
	if err != nil {
		return result{}, err
	}
	if err := e.resetTable(ctx, t, false); err != nil {
		return result{}, err
	}
	b, err := startBridge(ctx, e, kind, topic)
	if err != nil {
		return result{}, err
	}
	var firstAt, lastAt time.Time
	var lat *histogram
	profiled := make(chan error, 1)
	tick := time.NewTicker(scrapeInterval)
	defer tick.Stop()
	deadline := time.Now().Add(e.timeout)
	for lat == nil {
		select {
		case <-ctx.Done():
			b.stop()
			return result{}, ctx.Err()
		case err := <-b.exited:
			return result{}, fmt.Errorf("the bridge exited before committing %d rows (%v):\n%s", n, err, b.log.String())
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			b.stop()
			return result{}, fmt.Errorf("the bridge did not commit %d rows within %s:\n%s", n, e.timeout, b.log.String())
		}
		b.pollRSS()
		at := time.Now() // the values are read when the request arrives
		switch {
		case firstAt.IsZero():
			body, err := b.scrape(ctx)
			if err != nil {
				continue // not listening yet
			}
			if fetched, _ := livebridge.Sum(body, "kafka2pg_reader_records_total"); fetched > 0 {
				firstAt = at
				if e.profileDir != "" && keys == "" {
					go func() { profiled <- b.profile(ctx, e, filepath.Join(e.profileDir, topic+".pprof")) }()
				}
			}
		case lastAt.IsZero():
			committed, err := e.committed(ctx, b.group, topic)
			if err != nil {
				b.stop()
				return result{}, err
			}
			if committed >= int64(n) {
				lastAt = at
			}
		default: // the metrics follow the commit by a moment
			body, err := b.scrape(ctx)
			if err != nil {
				b.stop()
				return result{}, fmt.Errorf("read /metrics after the last commit: %w", err)
			}
			if rows, _ := livebridge.Sum(body, "kafka2pg_ingest_rows_total"); rows < float64(n) {
				continue
			}
			if lat = parseHistogram(body, "kafka2pg_end_to_end_latency_seconds"); lat == nil {
				b.stop()
				return result{}, errors.New("no kafka2pg_end_to_end_latency_seconds histogram in /metrics")
			}
		}
	}
	if e.profileDir != "" && keys == "" {
		if err := <-profiled; err != nil {
			b.stop()
			return result{}, err
		}
	}
	r := result{Kind: "bridge", Table: kind, Records: n, Wall: lastAt.Sub(b.t0), Active: lastAt.Sub(firstAt), ActiveRows: n,
		P50: lat.quantile(0.5), P99: lat.quantile(0.99), RecordBytes: e.bytesOf(kind), Keys: keys}
	b.finish(e, &r)
	if keys != "" {
		err = e.checkUpsert(ctx, &r, keys)
	} else {
		r.TableRows, err = e.count(ctx, t)
	}
	if err != nil {
		return result{}, err
	}
	e.logf("%-36s %s", r.title(), r.summary())
	return r, e.dropTable(ctx, t)
}

// profile writes a CPU profile of the bridge over e.profileFor to path.
func (b *bridgeProc) profile(ctx context.Context, e *env, path string) error {
	url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", strings.TrimSuffix(b.url, "/metrics"), max(int(e.profileFor.Seconds()), 1))
	body, err := livebridge.Get(ctx, &http.Client{Timeout: e.profileFor + 30*time.Second}, url)
	if err != nil {
		return fmt.Errorf("profile the bridge: %w", err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		return err
	}
	e.logf("wrote %s (%s of the bridge's CPU from its first fetch)", path, e.profileFor)
	return nil
}
