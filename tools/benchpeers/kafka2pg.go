package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/kafka2pg/kafka2pg/tools/internal/livebridge"
	"github.com/kafka2pg/kafka2pg/tools/internal/procfs"
)

// kafka2pgSystem runs the built binary, one process per run, with its
// defaults but for a typed sink of the 12 payload fields.
type kafka2pgSystem struct {
	bin     string
	brokers string
	pgURL   string
	tmp     string
	db      *db
	// transactions: the sink of changes-tx has transactions: true
	// (changestx.go); such a system runs that scenario only.
	transactions bool
}

func (s *kafka2pgSystem) label() string {
	if s.transactions {
		return txLabel
	}
	return "kafka2pg"
}

func (s *kafka2pgSystem) short() string {
	if s.transactions {
		return "kafka2pgtx"
	}
	return "kafka2pg"
}

// configYAML is the sink config of a run: the payload's fields by path,
// append (binary COPY) or upsert by id.
func kafka2pgConfig(topic, table string, upsert bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "sinks:\n  - topic: %s\n    table: %s\n    schema: public\n", topic, table)
	if upsert {
		b.WriteString("    mode: upsert\n    key: [id]\n")
	} else {
		b.WriteString("    mode: append\n")
	}
	b.WriteString("    columns:\n")
	for _, f := range fields {
		fmt.Fprintf(&b, "      - {name: %s, path: payload.%s, type: %q, not_null: %t%s}\n", f.name, f.name, f.column, !f.optional, f.extra)
	}
	return b.String()
}

func (s *kafka2pgSystem) start(ctx context.Context, sc scenario, topic, table, name string, probe bool) (handle, error) {
	cfg := filepath.Join(s.tmp, name+".yaml")
	yaml := kafka2pgConfig(topic, table, sc.upsert)
	if sc.changes {
		yaml = kafka2pgChangeConfig(topic, table)
	}
	if s.transactions {
		yaml = kafka2pgTxConfig(topic, table)
	}
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		return nil, err
	}
	h := &kafka2pgRun{sys: s, group: name, topic: topic, want: int64(sc.data.records()), wantTx: 2 * int64(sc.data.txCount()),
		args: []string{"run", "--config", cfg, "--kafka-brokers", s.brokers, "--kafka-group", name,
			"--pg-url", s.pgURL, "--metrics-addr=", "--log-level", "warn"}}
	if probe {
		// As the Connect worker's consumers in the probe: a killed
		// member's partitions move after 10 s, not the default 45.
		h.args = append(h.args, "--kafka-session-timeout", probeSessionTimeout.String())
	}
	return h, h.launch(ctx)
}

// kafka2pgRun is one run: the process, and its predecessors' CPU and peak
// memory when it was killed and started again.
type kafka2pgRun struct {
	sys         *kafka2pgSystem
	args        []string
	group       string
	topic       string
	want        int64
	wantTx      int64 // the transaction topic's records, with transactions
	cmd         *exec.Cmd
	log         livebridge.LogBuffer
	exited      chan error
	pastCPU     float64
	pastPeak    int64
	incarnation int
}

func (r *kafka2pgRun) launch(ctx context.Context) error {
	r.incarnation++
	r.cmd = exec.CommandContext(ctx, r.sys.bin, r.args...)
	r.cmd.Env = livebridge.Env(os.Environ())
	r.cmd.Stdout, r.cmd.Stderr = &r.log, &r.log
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	r.exited = make(chan error, 1)
	if err := r.cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", r.sys.bin, err)
	}
	go func(cmd *exec.Cmd, exited chan error) { exited <- cmd.Wait() }(r.cmd, r.exited)
	return nil
}

// refusal is the line of kafka2pg's log that refuses its format debezium
// sink (a build whose writer does not apply change events yet), or "".
func refusal(log string) string {
	for line := range strings.Lines(log) {
		if strings.Contains(line, "does not apply change events") {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

func (r *kafka2pgRun) pid() int { return r.cmd.Process.Pid }

func (r *kafka2pgRun) cpu() float64 { return r.pastCPU + procfs.ProcessCPU(r.pid()) }

func (r *kafka2pgRun) peak() int64 { return max(r.pastPeak, procfs.PeakRSS(r.pid())) }

func (r *kafka2pgRun) done(ctx context.Context) (bool, error) {
	select {
	case err := <-r.exited:
		r.exited <- err
		if why := refusal(r.log.String()); why != "" {
			return false, &notRunError{why: why}
		}
		return false, fmt.Errorf("kafka2pg exited (%v) before committing %d records:\n%s", err, r.want, r.log.String())
	default:
	}
	if r.sys.transactions {
		// Done once the last source transaction is applied, not staged.
		n, err := r.sys.db.appliedTx(ctx, r.group)
		return n >= r.wantTx, err
	}
	n, err := r.sys.db.committed(ctx, r.group, r.topic)
	return n >= r.want, err
}

// interval: the offsets are a few rows to read.
func (r *kafka2pgRun) interval() time.Duration { return 25 * time.Millisecond }

func (r *kafka2pgRun) kill9(context.Context) error {
	r.pastCPU, r.pastPeak = r.cpu(), r.peak()
	if err := r.cmd.Process.Kill(); err != nil {
		return fmt.Errorf("kill -9 kafka2pg: %w", err)
	}
	<-r.exited
	return nil
}

func (r *kafka2pgRun) restart(ctx context.Context) error { return r.launch(ctx) }

// stop sends SIGTERM and waits (30 s, then SIGKILL).
func (r *kafka2pgRun) stop(context.Context) error {
	select {
	case err := <-r.exited: // gone already
		r.exited <- err
		return nil
	default:
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-r.exited:
		r.exited <- err
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			return err
		}
	case <-time.After(30 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.exited
		return fmt.Errorf("kafka2pg did not stop within 30 s of SIGTERM:\n%s", r.log.String())
	}
	return nil
}

func (r *kafka2pgRun) logs() string { return r.log.String() }
