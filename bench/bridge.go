package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/kafka2pg/kafka2pg/internal/livebridge"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/kafka2pg/kafka2pg/internal/metricschart"
)

// scrapeInterval is how often the bench reads the bridge's /metrics: the
// resolution of the bridge's first and last commit times.
const scrapeInterval = 50 * time.Millisecond

// runBridge runs the built binary on topic, which holds n records, until
// /metrics reports them all committed; then it reads the latency histogram,
// stops the bridge with SIGTERM and counts the table.
func runBridge(ctx context.Context, e *env, kind, topic string, n int) (result, error) {
	t, _, err := tableFor(kind)
	if err != nil {
		return result{}, err
	}
	if err := e.resetTable(ctx, t, false); err != nil {
		return result{}, err
	}
	addr, err := livebridge.FreeAddr()
	if err != nil {
		return result{}, err
	}
	args := []string{"run", "--kafka-brokers", strings.Join(e.kafka.brokers, ","), "--kafka-group", "kafka2pg-bench-" + topic,
		"--pg-url", e.pgURL, "--metrics-addr", addr, "--log-level", "warn"}
	if kind == typedTable {
		cfg := filepath.Join(e.tmp, topic+".yaml")
		if err := os.WriteFile(cfg, []byte(configYAML(topic)), 0o600); err != nil {
			return result{}, err
		}
		args = append(args, "--config", cfg)
	} else {
		args = append(args, "--topic", topic, "--table", rawTable, "--pg-schema", "public")
	}
	cmd := exec.CommandContext(ctx, e.bin, args...)
	cmd.Env = livebridge.Env(os.Environ())
	var log livebridge.LogBuffer
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}

	oth0, pg0, t0 := e.othersCPU(), e.pg.cpu(), time.Now()
	if err := cmd.Start(); err != nil {
		return result{}, fmt.Errorf("start %s: %w", e.bin, err)
	}
	// VmHWM of the child, polled: its ru_maxrss would count this process's
	// memory, shared with the child between fork and exec.
	pid, peak := fmt.Sprint(cmd.Process.Pid), int64(0)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}

	client := &http.Client{Timeout: 2 * time.Second}
	url := "http://" + addr + "/metrics"
	var firstAt, lastAt time.Time
	var lat *histogram
	tick := time.NewTicker(scrapeInterval)
	defer tick.Stop()
	deadline := time.Now().Add(e.timeout)
	for lat == nil {
		select {
		case <-ctx.Done():
			stop()
			return result{}, ctx.Err()
		case err := <-exited:
			return result{}, fmt.Errorf("the bridge exited before committing %d rows (%v):\n%s", n, err, log.String())
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			stop()
			return result{}, fmt.Errorf("the bridge did not commit %d rows within %s:\n%s", n, e.timeout, log.String())
		}
		peak = max(peak, peakRSS(pid))
		at := time.Now() // the values are read when the request arrives
		body, err := livebridge.Get(ctx, client, url)
		if err != nil {
			continue // not listening yet
		}
		rows, _ := metricschart.Sum(body, "kafka2pg_ingest_rows_total")
		if fetched, _ := metricschart.Sum(body, "kafka2pg_reader_records_total"); fetched > 0 && firstAt.IsZero() {
			firstAt = at
		}
		if rows >= float64(n) {
			lastAt = at
			if lat = parseHistogram(body, "kafka2pg_end_to_end_latency_seconds"); lat == nil {
				stop()
				return result{}, errors.New("no kafka2pg_end_to_end_latency_seconds histogram in /metrics")
			}
		}
	}
	peak = max(peak, peakRSS(pid))
	stop()
	pgCPU, oth, end := e.pg.cpu()-pg0, e.othersCPU()-oth0, time.Now()
	r := result{Kind: "bridge", Table: kind, Records: n, Wall: lastAt.Sub(t0), Active: lastAt.Sub(firstAt), ActiveRows: n,
		PGCPU: pgCPU, PeakRSS: peak, P50: lat.quantile(0.5), P99: lat.quantile(0.99), RecordBytes: e.recordBytes, ClientCPU: math.NaN(), OthersCores: math.NaN()}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.ClientCPU = (tv(ru.Utime) + tv(ru.Stime)).Seconds()
		r.OthersCores = (oth - r.ClientCPU) / end.Sub(t0).Seconds()
	}
	if r.TableRows, err = e.count(ctx, t); err != nil {
		return result{}, err
	}
	e.logf("%-28s %s", r.title(), r.summary())
	return r, e.dropTable(ctx, t)
}
