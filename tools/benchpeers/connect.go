package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kafka2pg/kafka2pg/tools/internal/procfs"
)

// probeSessionTimeout is the consumers' session timeout in the kill -9
// probe, for both systems: a killed member's partitions move after it,
// instead of the default 45 s.
const probeSessionTimeout = 10 * time.Second

// worker is a Kafka Connect worker of scripts/connect-up.sh (distributed
// mode, one worker), under the instance name the harness owns.
type worker struct {
	repo     string
	instance string
	brokers  string
	flushMS  int
	url      string
	pid      int
	client   *http.Client
	logf     func(format string, args ...any)
}

// env is the environment of the connect scripts.
func (w *worker) env() []string {
	return append(os.Environ(), "CONNECT_INSTANCE="+w.instance, "CONNECT_BROKERS="+w.brokers,
		"CONNECT_OFFSET_FLUSH_MS="+strconv.Itoa(w.flushMS),
		// As kafka2pg's --kafka-session-timeout in the probe; it only
		// decides how soon a killed worker's partitions move.
		fmt.Sprintf("CONNECT_WORKER_PROPS=consumer.session.timeout.ms=%d", probeSessionTimeout.Milliseconds()))
}

// script runs scripts/NAME with args and returns its stdout.
func (w *worker) script(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(w.repo, "scripts", name), args...)
	cmd.Env = w.env()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("scripts/%s: %w\n%s", name, err, errb.String())
	}
	return strings.TrimSpace(out.String()), nil
}

// up starts the worker, or starts the recorded one again after a stop or
// a kill (it then resumes its connectors), and waits for its REST API.
func (w *worker) up(ctx context.Context) error {
	url, err := w.script(ctx, "connect-up.sh")
	if err != nil {
		return err
	}
	w.url = url
	b, err := os.ReadFile(filepath.Join(w.repo, ".tmp", "connect", w.instance, "pid"))
	if err != nil {
		return fmt.Errorf("read the worker's pid: %w", err)
	}
	if w.pid, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
		return fmt.Errorf("read the worker's pid: %w", err)
	}
	return nil
}

// alive tells whether the worker's process still runs.
func (w *worker) alive() bool {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", w.pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(st, ')')
	return i > 0 && i+2 < len(st) && st[i+2] != 'Z' && st[i+2] != 'X'
}

// signal sends sig to the worker and waits up to wait for it to be gone.
func (w *worker) signal(sig syscall.Signal, wait time.Duration) error {
	if w.pid == 0 || !w.alive() {
		return nil
	}
	if err := syscall.Kill(w.pid, sig); err != nil {
		return fmt.Errorf("kill -%d %d (the Connect worker): %w", sig, w.pid, err)
	}
	for deadline := time.Now().Add(wait); w.alive(); {
		if time.Now().After(deadline) {
			return fmt.Errorf("the Connect worker (pid %d) still runs %s after signal %d", w.pid, wait, sig)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// stop stops the worker (SIGTERM, then SIGKILL after 30 s).
func (w *worker) stop() error {
	if err := w.signal(syscall.SIGTERM, 30*time.Second); err != nil {
		w.logf("note: %v; killing it", err)
		return w.signal(syscall.SIGKILL, 10*time.Second)
	}
	return nil
}

// down stops the worker and deletes its state (scripts/connect-down.sh).
func (w *worker) down(ctx context.Context) error {
	_, err := w.script(ctx, "connect-down.sh")
	return err
}

// rest sends a request to the worker's REST API and decodes a JSON answer
// into out (when not nil); an answer other than 2xx is an error.
func (w *worker) rest(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, w.url+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := w.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(b)))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s %s: decode %q: %w", method, path, b, err)
		}
	}
	return nil
}

// versions are what the worker reports of itself and its plugin.
func (w *worker) versions(ctx context.Context) (connect, debezium string, err error) {
	var root struct {
		Version string `json:"version"`
	}
	if err := w.rest(ctx, http.MethodGet, "/", nil, &root); err != nil {
		return "", "", err
	}
	var plugins []struct {
		Class   string `json:"class"`
		Version string `json:"version"`
	}
	if err := w.rest(ctx, http.MethodGet, "/connector-plugins", nil, &plugins); err != nil {
		return "", "", err
	}
	for _, p := range plugins {
		if p.Class == jdbcSinkClass {
			debezium = p.Version
		}
	}
	if debezium == "" {
		return "", "", fmt.Errorf("the worker at %s has no %s plugin", w.url, jdbcSinkClass)
	}
	return root.Version, debezium, nil
}

// connectorStatus is GET /connectors/NAME/status, abridged.
type connectorStatus struct {
	Connector struct {
		State string `json:"state"`
		Trace string `json:"trace"`
	} `json:"connector"`
	Tasks []struct {
		ID    int    `json:"id"`
		State string `json:"state"`
		Trace string `json:"trace"`
	} `json:"tasks"`
}

// failure is the trace of a failed connector or task, "" when none failed.
func (s connectorStatus) failure() string {
	if s.Connector.State == "FAILED" {
		return "connector FAILED: " + s.Connector.Trace
	}
	for _, t := range s.Tasks {
		if t.State == "FAILED" {
			return fmt.Sprintf("task %d FAILED: %s", t.ID, t.Trace)
		}
	}
	return ""
}

const jdbcSinkClass = "io.debezium.connector.jdbc.JdbcSinkConnector"

// debeziumSystem is the Debezium JDBC sink on the worker: one connector per
// run, on a worker started for that run (so that its CPU and peak memory
// are the run's own, JIT warm-up included, as kafka2pg's are).
type debeziumSystem struct {
	w     *worker
	pgURL string
	db    *db
}

func (s *debeziumSystem) label() string { return "Debezium JDBC sink" }
func (s *debeziumSystem) short() string { return "debezium" }

// sinkConfig is the connector's configuration for a run: Debezium's
// defaults but for the connection, the table, the key converter and what
// the scenario sets.
func (s *debeziumSystem) sinkConfig(sc scenario, topic, table string) (map[string]string, error) {
	pc, err := pgconn.ParseConfig(s.pgURL)
	if err != nil {
		return nil, fmt.Errorf("parse the Postgres URL: %w", err)
	}
	url := fmt.Sprintf("jdbc:postgresql://%s:%d/%s", pc.Host, pc.Port, pc.Database)
	if sc.jdbcParams != "" {
		url += "?" + sc.jdbcParams
	}
	cfg := map[string]string{
		"connector.class":     jdbcSinkClass,
		"topics":              topic,
		"connection.url":      url,
		"connection.username": pc.User,
		"connection.password": pc.Password,
		// The harness creates the table (schema.evolution=none, the
		// default), the same as kafka2pg's.
		"collection.name.format": table,
		// The keys are plain ids; the values are JSON with schemas
		// (the worker's default converter).
		"key.converter": "org.apache.kafka.connect.storage.StringConverter",
	}
	for k, v := range sc.debezium {
		cfg[k] = v
	}
	return cfg, nil
}

func (s *debeziumSystem) start(ctx context.Context, sc scenario, topic, table, name string, _ bool) (handle, error) {
	cfg, err := s.sinkConfig(sc, topic, table)
	if err != nil {
		return nil, err
	}
	h := &debeziumRun{sys: s, name: name, table: table, want: sc.data.final(sc.upsert), upsert: sc.upsert, cpu0: procfs.ProcessCPU(s.w.pid)}
	if err := s.w.rest(ctx, http.MethodPut, "/connectors/"+name+"/config", cfg, nil); err != nil {
		return nil, err
	}
	return h, nil
}

// freshWorker gives the next run a worker of its own: the old one (if any)
// stops, and the recorded worker starts again with its topics.
func (s *debeziumSystem) freshWorker(ctx context.Context) error {
	if err := s.w.stop(); err != nil {
		return err
	}
	return s.w.up(ctx)
}

// debeziumRun is one connector on the worker.
type debeziumRun struct {
	sys      *debeziumSystem
	name     string
	table    string
	want     finalState
	upsert   bool
	cpu0     float64 // the worker's CPU when the connector was created
	pastCPU  float64 // of killed incarnations of the worker
	pastPeak int64
	watch    tableWatch // for the adaptive count of an append table
	checked  time.Time  // of the status
}

func (r *debeziumRun) pid() int { return r.sys.w.pid }

func (r *debeziumRun) cpu() float64 { return r.pastCPU + procfs.ProcessCPU(r.sys.w.pid) - r.cpu0 }

func (r *debeziumRun) peak() int64 { return max(r.pastPeak, procfs.PeakRSS(r.sys.w.pid)) }

// done tells whether every record is in the table. An upsert table is
// checked by the last record of each partition (index lookups); an append
// table is counted, less often while much is missing (interval).
func (r *debeziumRun) done(ctx context.Context) (bool, error) {
	if time.Since(r.checked) > 2*time.Second {
		r.checked = time.Now()
		if !r.sys.w.alive() {
			return false, fmt.Errorf("the Connect worker (pid %d) exited; see .tmp/connect/%s/connect.log", r.sys.w.pid, r.sys.w.instance)
		}
		var st connectorStatus
		if err := r.sys.w.rest(ctx, http.MethodGet, "/connectors/"+r.name+"/status", nil, &st); err == nil {
			if f := st.failure(); f != "" {
				return false, fmt.Errorf("the JDBC sink failed: %s", f)
			}
		}
	}
	return r.watch.done(ctx, r.sys.db, r.table, r.want, r.upsert)
}

func (r *debeziumRun) interval() time.Duration { return r.watch.next(r.want, r.upsert) }

func (r *debeziumRun) kill9(context.Context) error {
	r.pastCPU, r.pastPeak = r.cpu(), r.peak()
	r.cpu0 = 0
	return r.sys.w.signal(syscall.SIGKILL, 10*time.Second)
}

// restart starts the killed worker again: it resumes the connector from
// the offsets it had committed.
func (r *debeziumRun) restart(ctx context.Context) error { return r.sys.w.up(ctx) }

// stop deletes the connector.
func (r *debeziumRun) stop(ctx context.Context) error {
	return r.sys.w.rest(ctx, http.MethodDelete, "/connectors/"+r.name, nil, nil)
}

func (r *debeziumRun) logs() string {
	b, _ := os.ReadFile(filepath.Join(r.sys.w.repo, ".tmp", "connect", r.sys.w.instance, "connect.log"))
	if len(b) > 8000 {
		b = b[len(b)-8000:]
	}
	return string(b)
}
