package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kafka2pg/kafka2pg/tools/internal/livebridge"
	"github.com/kafka2pg/kafka2pg/tools/internal/procfs"
)

// flinkSources are the files the job's jar is built from, relative to the
// checkout; their hash names the cached jar.
var flinkSources = []string{
	"connect/settings.xml",
	"tools/benchpeers/flink/pom.xml",
	"tools/benchpeers/flink/src/main/java/kafka2pg/bench/FlinkXaJob.java",
	"tools/benchpeers/flink/src/main/resources/log4j2.properties",
}

// flinkJar builds the Flink job's shaded jar with Maven (the jars from
// Maven Central through connect/settings.xml, cached in ~/.m2) unless the
// jar of the same sources is in REPO/.tmp/flink already, and returns its
// path. logf reports a build.
func flinkJar(ctx context.Context, repo string, logf func(format string, args ...any)) (string, error) {
	h := sha256.New()
	for _, src := range flinkSources {
		b, err := os.ReadFile(filepath.Join(repo, src))
		if err != nil {
			return "", fmt.Errorf("the Flink job's sources: %w", err)
		}
		h.Write(b)
	}
	dir := filepath.Join(repo, ".tmp", "flink")
	jar := filepath.Join(dir, "flink-xa-peer-"+hex.EncodeToString(h.Sum(nil))[:12]+".jar")
	if _, err := os.Stat(jar); err == nil {
		return jar, nil
	}
	if _, err := exec.LookPath("mvn"); err != nil {
		return "", fmt.Errorf("no mvn on PATH: the Flink job is built with Maven from Maven Central (Debian: apt-get install -y maven)")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	logf("building the Flink job with Maven (tools/benchpeers/flink, jars cached in ~/.m2)")
	started := time.Now()
	build := filepath.Join(dir, "build")
	// A build directory of its own, so that the checkout stays clean and
	// two builds never share target/.
	cmd := exec.CommandContext(ctx, "mvn", "-B", "-q", "-Dstyle.color=never", "-s", filepath.Join(repo, "connect", "settings.xml"),
		"-f", filepath.Join(repo, "tools", "benchpeers", "flink", "pom.xml"), "package", "-Dflink.build.dir="+build)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build the Flink job (mvn package in tools/benchpeers/flink): %w\n%s", err, tail(out.String(), 4000))
	}
	if err := os.Rename(filepath.Join(build, "flink-xa-peer.jar"), jar); err != nil {
		return "", fmt.Errorf("keep the Flink job's jar: %w", err)
	}
	logf("built %s in %.0fs", jar, time.Since(started).Seconds())
	return jar, nil
}

// flinkJVMOptions are the JVM options of Flink's own launcher for Java 17
// (its config.yaml env.java.opts.all), the heap of the Connect worker, and
// UTC, so that a bound java.sql.Timestamp is the record's instant.
var flinkJVMOptions = []string{
	"-Xms256m", "-Xmx2g", "-Duser.timezone=UTC",
	"--add-exports=java.base/sun.net.util=ALL-UNNAMED",
	"--add-exports=java.rmi/sun.rmi.registry=ALL-UNNAMED",
	"--add-exports=java.security.jgss/sun.security.krb5=ALL-UNNAMED",
	"--add-opens=java.base/java.lang=ALL-UNNAMED",
	"--add-opens=java.base/java.net=ALL-UNNAMED",
	"--add-opens=java.base/java.io=ALL-UNNAMED",
	"--add-opens=java.base/java.nio=ALL-UNNAMED",
	"--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
	"--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
	"--add-opens=java.base/java.text=ALL-UNNAMED",
	"--add-opens=java.base/java.time=ALL-UNNAMED",
	"--add-opens=java.base/java.util=ALL-UNNAMED",
	"--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
	"--add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED",
	"--add-opens=java.base/java.util.concurrent.locks=ALL-UNNAMED",
}

// flinkSystem is Flink's exactly-once JDBC sink (XA two-phase commit bound
// to checkpoints) in a local MiniCluster, one JVM per run: the job of
// tools/benchpeers/flink, batches of 5,000, checkpoints every checkpoint.
type flinkSystem struct {
	jar         string
	brokers     string
	pgURL       string
	tmp         string
	logDir      string
	db          *db
	parallelism int
	checkpoint  time.Duration
	// restore: a restart after kill -9 resumes from the latest retained
	// checkpoint (the only way its exactly-once holds); otherwise it
	// starts plainly, from the group's offsets committed to Kafka.
	restore bool
}

func (s *flinkSystem) label() string { return fmt.Sprintf("Flink XA p%d", s.parallelism) }

func (s *flinkSystem) short() string { return fmt.Sprintf("flinkp%d", s.parallelism) }

// restartLabel names how the probe restarts it.
func (s *flinkSystem) restartLabel() string {
	if s.restore {
		return "restarted from its retained checkpoint"
	}
	return "restarted plainly (group offsets)"
}

func (s *flinkSystem) start(ctx context.Context, sc scenario, topic, table, name string, probe bool) (handle, error) {
	pc, err := pgconn.ParseConfig(s.pgURL)
	if err != nil {
		return nil, fmt.Errorf("parse the Postgres URL: %w", err)
	}
	mode := "append"
	if sc.upsert {
		mode = "upsert"
	}
	ckpt := filepath.Join(s.tmp, name+"-checkpoints")
	r := &flinkRun{sys: s, table: table, ckpt: ckpt, want: sc.data.final(sc.upsert), upsert: sc.upsert,
		args: []string{"brokers=" + s.brokers, "topic=" + topic, "group=" + name,
			fmt.Sprintf("jdbc=jdbc:postgresql://%s:%d/%s", pc.Host, pc.Port, pc.Database),
			"user=" + pc.User, "password=" + pc.Password, "table=" + table, "mode=" + mode,
			"parallelism=" + strconv.Itoa(s.parallelism), "checkpoint-ms=" + strconv.FormatInt(s.checkpoint.Milliseconds(), 10),
			"batch=5000", "checkpoint-dir=file://" + ckpt}}
	if err := os.MkdirAll(s.logDir, 0o755); err == nil {
		r.logFile, _ = os.Create(filepath.Join(s.logDir, name+".log"))
	}
	if probe {
		r.args = append(r.args, "session-timeout-ms="+strconv.FormatInt(probeSessionTimeout.Milliseconds(), 10))
	}
	return r, r.launch(ctx, "")
}

// flinkRun is one run of the job: the JVM, and its predecessors' CPU and
// peak memory when it was killed and started again.
type flinkRun struct {
	sys      *flinkSystem
	args     []string
	table    string
	ckpt     string
	want     finalState
	upsert   bool
	cmd      *exec.Cmd
	log      livebridge.LogBuffer
	exited   chan error
	pastCPU  float64
	pastPeak int64
	watch    tableWatch
	// restoredFrom is the checkpoint of each restart from one.
	restoredFrom []string
	// logFile keeps the JVM's output of every incarnation in
	// REPO/.tmp/flink/logs, after the harness's temporary directory is
	// gone.
	logFile *os.File
}

func (r *flinkRun) launch(ctx context.Context, restore string) error {
	args := append(append([]string{}, flinkJVMOptions...), "-jar", r.sys.jar)
	args = append(args, r.args...)
	if restore != "" {
		args = append(args, "restore="+restore)
	}
	r.cmd = exec.CommandContext(ctx, "java", args...)
	fmt.Fprintf(&r.log, "--- %s start%s\n", time.Now().Format(time.TimeOnly), map[bool]string{true: " from " + restore}[restore != ""])
	r.cmd.Stdout, r.cmd.Stderr = &r.log, &r.log
	if r.logFile != nil {
		r.cmd.Stdout, r.cmd.Stderr = io.MultiWriter(&r.log, r.logFile), io.MultiWriter(&r.log, r.logFile)
		fmt.Fprintf(r.logFile, "--- %s start%s\n", time.Now().Format(time.TimeOnly), map[bool]string{true: " from " + restore}[restore != ""])
	}
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	r.exited = make(chan error, 1)
	if err := r.cmd.Start(); err != nil {
		return fmt.Errorf("start the Flink job: %w", err)
	}
	go func(cmd *exec.Cmd, exited chan error) { exited <- cmd.Wait() }(r.cmd, r.exited)
	return nil
}

func (r *flinkRun) cpu() float64 { return r.pastCPU + procfs.ProcessCPU(r.cmd.Process.Pid) }

func (r *flinkRun) peak() int64 { return max(r.pastPeak, procfs.PeakRSS(r.cmd.Process.Pid)) }

func (r *flinkRun) done(ctx context.Context) (bool, error) {
	select {
	case err := <-r.exited:
		r.exited <- err
		return false, fmt.Errorf("the Flink job exited (%v)", err)
	default:
	}
	return r.watch.done(ctx, r.sys.db, r.table, r.want, r.upsert)
}

func (r *flinkRun) interval() time.Duration { return r.watch.next(r.want, r.upsert) }

func (r *flinkRun) kill9(context.Context) error {
	r.pastCPU, r.pastPeak = r.cpu(), r.peak()
	if err := r.cmd.Process.Kill(); err != nil {
		return fmt.Errorf("kill -9 the Flink job: %w", err)
	}
	err := <-r.exited
	r.exited <- err // for stop, should the restart fail
	return nil
}

// restart starts the job again: from its latest retained checkpoint, or
// plainly.
func (r *flinkRun) restart(ctx context.Context) error {
	if !r.sys.restore {
		return r.launch(ctx, "")
	}
	chk, err := latestCheckpoint(r.ckpt)
	if err != nil {
		return err
	}
	r.restoredFrom = append(r.restoredFrom, chk)
	return r.launch(ctx, chk)
}

// latestCheckpoint is the newest complete checkpoint (chk-N with its
// _metadata) under dir, over every job that wrote there.
func latestCheckpoint(dir string) (string, error) {
	var best string
	var bestTime time.Time
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "_metadata" || !strings.HasPrefix(filepath.Base(filepath.Dir(p)), "chk-") {
			return err
		}
		info, err := d.Info()
		if err == nil && info.ModTime().After(bestTime) {
			best, bestTime = filepath.Dir(p), info.ModTime()
		}
		return err
	})
	if err != nil {
		return "", fmt.Errorf("find the retained checkpoint in %s: %w", dir, err)
	}
	if best == "" {
		return "", fmt.Errorf("no completed checkpoint in %s to restart from", dir)
	}
	return "file://" + best, nil
}

// stop ends the JVM (SIGTERM, then SIGKILL after 30 s) and rolls back the
// transactions it left prepared, which would hold their locks (and block
// the DROP of the table) until someone resolves them.
func (r *flinkRun) stop(ctx context.Context) error {
	select {
	case err := <-r.exited:
		r.exited <- err
	default:
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-r.exited:
			r.exited <- err
		case <-time.After(30 * time.Second):
			_ = r.cmd.Process.Kill()
			<-r.exited
		}
	}
	if r.logFile != nil {
		r.logFile.Close()
	}
	_, err := r.sys.db.rollbackPrepared(ctx)
	return err
}

func (r *flinkRun) logs() string { return r.log.String() }

// preparedCount is the number of prepared transactions in the database.
func (d *db) preparedCount(ctx context.Context) (int64, error) {
	return d.scalar(ctx, "SELECT count(*) FROM pg_prepared_xacts WHERE database = current_database()")
}

// rollbackPrepared rolls back every prepared transaction of the database
// (only the XA sink prepares here) and returns how many there were.
func (d *db) rollbackPrepared(ctx context.Context) (int, error) {
	rows, err := d.conn.Query(ctx, "SELECT gid FROM pg_prepared_xacts WHERE database = current_database()")
	if err != nil {
		return 0, fmt.Errorf("list the prepared transactions: %w", err)
	}
	gids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, fmt.Errorf("list the prepared transactions: %w", err)
	}
	for _, gid := range gids {
		if _, err := d.conn.Exec(ctx, "ROLLBACK PREPARED "+quoteLiteral(gid)); err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == "42704" {
				continue // resolved meanwhile
			}
			return 0, fmt.Errorf("ROLLBACK PREPARED %s: %w", gid, err)
		}
	}
	return len(gids), nil
}

// parseParallelism reads -flink-parallelism: "2,4", or "" for none.
func parseParallelism(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > 64 {
			return nil, fmt.Errorf("-flink-parallelism has %q: give parallelisms from 1 to 64, comma-separated (e.g. 2,4), or nothing", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// newFlinkSystems builds the job (once; cached) and returns one system per
// parallelism of o, none when o names none. It records the versions in f.
func newFlinkSystems(ctx context.Context, o options, d *db, tmp string, f *facts) ([]*flinkSystem, error) {
	if len(o.flinkParallelism) == 0 {
		return nil, nil
	}
	var prepared int64
	if err := d.conn.QueryRow(ctx, "SELECT current_setting('max_prepared_transactions')::bigint").Scan(&prepared); err != nil {
		return nil, fmt.Errorf("SHOW max_prepared_transactions: %w", err)
	}
	if prepared < int64(2*slices.Max(o.flinkParallelism)) {
		return nil, fmt.Errorf("Postgres has max_prepared_transactions %d: Flink's XA sink prepares a transaction per subtask and checkpoint and needs at least %d (scripts/pg-up.sh sets 64: make pg-down and start it again), or pass -flink-parallelism= to leave Flink out",
			prepared, 2*slices.Max(o.flinkParallelism))
	}
	// Transactions an interrupted run left prepared hold locks on its
	// tables, and the harness's DROP TABLE would wait on them.
	if n, err := d.rollbackPrepared(ctx); err != nil {
		return nil, err
	} else if n > 0 {
		o.logf("rolled back %d transactions an earlier run left prepared", n)
	}
	jar, err := flinkJar(ctx, o.repo, o.logf)
	if err != nil {
		return nil, err
	}
	f.flink = flinkVersions(o.repo)
	var out []*flinkSystem
	for _, p := range o.flinkParallelism {
		out = append(out, &flinkSystem{jar: jar, brokers: o.brokers, pgURL: o.pgURL, tmp: tmp, logDir: filepath.Join(o.repo, ".tmp", "flink", "logs"), db: d, parallelism: p, checkpoint: o.flinkCheckpoint})
	}
	return out, nil
}

// flinkVersions names Flink and its connectors as the job's pom.xml pins
// them.
func flinkVersions(repo string) string {
	b, _ := os.ReadFile(filepath.Join(repo, "tools", "benchpeers", "flink", "pom.xml"))
	prop := func(name string) string {
		_, rest, ok := strings.Cut(string(b), "<"+name+">")
		v, _, _ := strings.Cut(rest, "<")
		if !ok {
			return "?"
		}
		return v
	}
	return fmt.Sprintf("Flink %s, flink-connector-kafka %s, flink-connector-jdbc-core and -postgres %s, PostgreSQL JDBC %s",
		prop("flink.version"), prop("flink.kafka.version"), prop("flink.jdbc.version"), prop("postgresql.version"))
}

// runs tells whether sys runs scenario sc: Flink's job has one append
// configuration (append-batch stands for it) and no applier of change
// events.
func runs(sys system, sc scenario) bool {
	if k, ok := sys.(*kafka2pgSystem); ok {
		return !k.transactions || sc.data.txEvents > 0
	}
	if sc.data.txEvents > 0 {
		return false // changes-tx compares kafka2pg with itself
	}
	if _, ok := sys.(*flinkSystem); ok {
		return !sc.changes && sc.key != "append-defaults"
	}
	return true
}

// duplicateRanges describes, per partition, the seqs that are in table
// more than once: "p0 1200-1650 (451 seqs, 2x)": where a restart replayed.
func (d *db) duplicateRanges(ctx context.Context, table string) (string, error) {
	rows, err := d.conn.Query(ctx, fmt.Sprintf(`SELECT id %% %d, min(seq), max(seq), count(*), max(n) FROM
		(SELECT id, seq, count(*) AS n FROM %s GROUP BY id, seq HAVING count(*) > 1) d GROUP BY 1 ORDER BY 1`, partitions, pgx.Identifier{table}.Sanitize()))
	if err != nil {
		return "", fmt.Errorf("find the duplicates of %s: %w", table, err)
	}
	var parts []string
	var p, lo, hi, n, times int64
	_, err = pgx.ForEachRow(rows, []any{&p, &lo, &hi, &n, &times}, func() error {
		parts = append(parts, fmt.Sprintf("p%d %d-%d (%d seqs, up to %dx)", p, lo, hi, n, times))
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("find the duplicates of %s: %w", table, err)
	}
	return strings.Join(parts, "; "), nil
}
