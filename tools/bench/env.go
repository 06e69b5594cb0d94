package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/tools/internal/procfs"
)

// env is what every scenario of a run shares.
type env struct {
	pgURL       string
	bin         string
	tmp         string
	timeout     time.Duration
	logf        func(format string, args ...any)
	conn        *pgx.Conn // the bench's own: DDL, CHECKPOINT, counts
	pg          procfs.Postgres
	pgVersion   string
	pgSettings  string // the settings that matter here, "name value, ..."
	kafka       *kafka
	kafkaName   string
	kfake       *exec.Cmd // the kfake child; nil with a real broker
	kfakeStdin  io.Closer
	profileDir  string        // -bridge-profile; empty: no profiles
	profileFor  time.Duration // -bridge-profile-for
	recordBytes float64       // mean key+value bytes of the default records
	smallBytes  float64       // and of the small ones (smallTable)
}

// bytesOf is the mean key+value bytes of the records of table.
func (e *env) bytesOf(table string) float64 {
	if table == smallTable {
		return e.smallBytes
	}
	return e.recordBytes
}

func newEnv(ctx context.Context, o options, bin string) (_ *env, err error) {
	e := &env{pgURL: o.pgURL, bin: bin, timeout: o.timeout, logf: o.logf, profileDir: o.profileDir, profileFor: o.profileFor}
	defer func() {
		if err != nil {
			e.Close(ctx)
		}
	}()
	if e.tmp, err = os.MkdirTemp("", "kafka2pg-bench-"); err != nil {
		return nil, err
	}
	if e.conn, err = pgx.Connect(ctx, o.pgURL); err != nil {
		return nil, fmt.Errorf("connect to Postgres: %w", err)
	}
	if err := e.conn.QueryRow(ctx, "SHOW server_version").Scan(&e.pgVersion); err != nil {
		return nil, fmt.Errorf("SHOW server_version: %w", err)
	}
	e.pgVersion, _, _ = strings.Cut(e.pgVersion, " ")
	// The settings that move these figures, as the server has them.
	if err := e.conn.QueryRow(ctx, `SELECT string_agg(name || ' ' || current_setting(name), ', ' ORDER BY name) FROM pg_settings
		WHERE name IN ('checkpoint_timeout', 'fsync', 'max_wal_size', 'shared_buffers', 'synchronous_commit', 'wal_compression')`).Scan(&e.pgSettings); err != nil {
		return nil, fmt.Errorf("read the Postgres settings: %w", err)
	}
	e.pg = procfs.FindPostgres(ctx, e.conn)
	if e.pg.Why != "" {
		o.logf("note: Postgres CPU is not measured: %s", e.pg.Why)
	}
	brokers := strings.Split(o.brokers, ",")
	e.kafkaName = "Kafka at " + o.brokers + " (KAFKA2PG_TEST_BROKERS)"
	if o.brokers == "" {
		if brokers, err = e.startKfake(ctx); err != nil {
			return nil, err
		}
		e.kafkaName = "kfake (franz-go's in-process Kafka) in a child process of the bench, 1 broker"
	}
	if e.kafka, err = newKafka(brokers); err != nil {
		return nil, err
	}
	e.recordBytes, e.smallBytes = meanRecordBytes(o.records, recordValue), meanRecordBytes(o.records, smallValue)
	o.logf("Postgres %s, %s, %.1f bytes per record (key + value), %.1f per small record", e.pgVersion, e.kafkaName, e.recordBytes, e.smallBytes)
	return e, nil
}

// Close stops the kfake child and waits for it (10 s at most), closes the
// connections and removes the temporary directory.
func (e *env) Close(ctx context.Context) {
	if e.kafka != nil {
		e.kafka.Close()
	}
	if e.kfake != nil {
		e.kfakeStdin.Close() // the child exits when its stdin closes
		done := make(chan struct{})
		go func() { _ = e.kfake.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = e.kfake.Process.Kill()
			<-done
		}
	}
	if e.conn != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		e.conn.Close(cctx)
	}
	if e.tmp != "" {
		os.RemoveAll(e.tmp)
	}
}

// roleEnv names the variable that makes the bench binary (or the test
// binary, see TestMain) serve kfake instead.
const roleEnv = "KAFKA2PG_BENCH_ROLE"

// startKfake re-runs this executable as a kfake cluster and returns its
// listen addresses.
func (e *env) startKfake(ctx context.Context) ([]string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, self)
	cmd.Env = append(os.Environ(), roleEnv+"=kfake")
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start kfake: %w", err)
	}
	e.kfake, e.kfakeStdin = cmd, stdin
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("read kfake's addresses: %w", err)
	}
	return strings.Split(strings.TrimSpace(line), ","), nil
}

// serveKfakeIfAsked serves a kfake cluster when roleEnv says so: it prints
// the listen addresses on a line and runs until stdin closes. It reports
// whether it did.
func serveKfakeIfAsked() bool {
	if os.Getenv(roleEnv) != "kfake" {
		return false
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench kfake: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(strings.Join(c.ListenAddrs(), ","))
	_, _ = io.Copy(io.Discard, os.Stdin)
	c.Close()
	return true
}

// resetTable drops t and runs CHECKPOINT; create also creates t as the
// bridge would (schema.PlanCreate).
func (e *env) resetTable(ctx context.Context, t schema.Table, create bool) error {
	if err := e.dropTable(ctx, t); err != nil {
		return err
	}
	if create {
		for _, stmt := range schema.PlanCreate(t) {
			if _, err := e.conn.Exec(ctx, stmt); err != nil {
				return fmt.Errorf("create %s: %w", t.QualifiedName(), err)
			}
		}
	}
	return checkpoint(ctx, e.conn)
}

// checkpoint runs CHECKPOINT and returns once pg_stat_bgwriter counts it.
// The checkpointer wakes the waiting backend before it reports its
// statistics, so a read right after CHECKPOINT returns can miss it (seen
// on a loaded machine), and a run reading its start figures then would
// count the bench's own checkpoint as one Postgres took during the run.
func checkpoint(ctx context.Context, conn *pgx.Conn) error {
	before, err := readCheckpointStats(ctx, conn)
	if err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "CHECKPOINT"); err != nil {
		return fmt.Errorf("CHECKPOINT (the bench runs it before every run; it needs superuser or the pg_checkpoint role): %w", err)
	}
	const patience = 10 * time.Second
	for deadline := time.Now().Add(patience); ; {
		st, err := readCheckpointStats(ctx, conn)
		if err != nil {
			return err
		}
		if st.count > before.count {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("CHECKPOINT returned but pg_stat_bgwriter still counts %d checkpoints %v later (were the statistics reset?)", st.count, patience)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// dropTable drops t and the bench groups' offsets kept by the bridge.
func (e *env) dropTable(ctx context.Context, t schema.Table) error {
	if _, err := e.conn.Exec(ctx, "DROP TABLE IF EXISTS "+t.QualifiedName()); err != nil {
		return fmt.Errorf("drop %s: %w", t.QualifiedName(), err)
	}
	if _, err := e.conn.Exec(ctx, `DO $$ BEGIN
		IF to_regclass('kafka2pg.offsets') IS NOT NULL THEN
			DELETE FROM kafka2pg.offsets WHERE consumer_group LIKE 'kafka2pg-bench-%';
		END IF; END $$`); err != nil {
		return fmt.Errorf("delete the bench groups' offsets: %w", err)
	}
	return nil
}

// committed is the number of offsets of topic the group has made durable
// (the sum of its partitions' next_offset: the bench's topics start at 0
// and hold no transaction markers, so that is the records committed).
func (e *env) committed(ctx context.Context, group, topic string) (int64, error) {
	var n int64
	err := e.conn.QueryRow(ctx, `SELECT coalesce(sum(next_offset), 0)::bigint FROM kafka2pg.offsets
		WHERE consumer_group = $1 AND topic = $2`, group, topic).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("read the bridge's offsets: %w", err)
	}
	return n, nil
}

// count is the row count of t.
func (e *env) count(ctx context.Context, t schema.Table) (int64, error) {
	var n int64
	if err := e.conn.QueryRow(ctx, "SELECT count(*) FROM "+t.QualifiedName()).Scan(&n); err != nil {
		return 0, fmt.Errorf("count %s: %w", t.QualifiedName(), err)
	}
	return n, nil
}
