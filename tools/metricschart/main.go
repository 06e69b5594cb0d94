// Command metricschart runs kafka2pg under a real workload and draws what its
// /metrics said, every 250 ms, as docs/img/metrics.svg:
//
//	cd tools && go run ./metricschart -bin ../bin/kafka2pg -pg-url "$PG" -out ../docs/img/metrics.svg
//
// The workload: an in-process Kafka (kfake) with one topic; a backlog
// produced before the bridge starts; the bridge (the binary given with -bin,
// as a subprocess with --metrics-addr on a free loopback port); a producer
// at -rate records/s for -duration, with a burst of -burst records halfway.
// Once the producer has stopped and /metrics reports every record committed
// and zero lag, the bridge gets SIGTERM and the chart is written: rows/s
// (kafka2pg_ingest_rows_total) and total lag
// (kafka2pg_reader_partition_lag_records, summed over partitions) over time,
// with the date, the commit and the setup in the header.
//
// It drops its table and its group's offsets in Postgres before and after
// the run. Exit status: 0 when the chart was written, 1 when the run failed,
// 2 on bad flags.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka2pg/kafka2pg/tools/internal/figures"
	"github.com/kafka2pg/kafka2pg/tools/internal/livebridge"
	"github.com/kafka2pg/kafka2pg/tools/internal/svgchart"
)

// options are the command's flags.
type options struct {
	bin        string
	pgURL      string
	out        string
	commit     string
	partitions int
	backlog    int
	rate       int
	burst      int
	duration   time.Duration
	interval   time.Duration
}

const (
	topic = "page_views"
	table = "metrics_chart_page_views"
	group = "kafka2pg-metrics-chart"
)

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "../bin/kafka2pg", "the kafka2pg binary to run (make build; the default is relative to tools/)")
	flag.StringVar(&o.pgURL, "pg-url", cmp.Or(os.Getenv("KAFKA2PG_PG_URL"), os.Getenv("DATABASE_URL")), "PostgreSQL URL (env KAFKA2PG_PG_URL or DATABASE_URL)")
	flag.StringVar(&o.out, "out", "../docs/img/metrics.svg", "SVG file to write")
	flag.StringVar(&o.commit, "commit", "", "commit named in the header (default: git describe of the work tree)")
	flag.IntVar(&o.partitions, "partitions", 6, "partitions of the topic")
	flag.IntVar(&o.backlog, "backlog", 500_000, "records produced before the bridge starts")
	flag.IntVar(&o.rate, "rate", 5_000, "records per second the producer aims at while it runs")
	flag.IntVar(&o.burst, "burst", 200_000, "records produced at once halfway through -duration")
	flag.DurationVar(&o.duration, "duration", 20*time.Second, "how long the producer runs after the bridge started")
	flag.DurationVar(&o.interval, "interval", 250*time.Millisecond, "how often /metrics is scraped")
	flag.Parse()
	if o.pgURL == "" || o.partitions < 1 || o.rate < 1 || o.backlog < 0 || o.burst < 0 || o.duration <= 0 || o.interval <= 0 {
		fmt.Fprintln(os.Stderr, "metricschart: need -pg-url (or KAFKA2PG_PG_URL), and positive -partitions, -rate, -duration, -interval")
		os.Exit(2)
	}
	if o.commit == "" {
		o.commit = describeCommit()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintf(os.Stderr, "metricschart: %v\n", err)
		os.Exit(1)
	}
}

// sample is one scrape: seconds since the bridge started, the committed rows
// and the total lag (NaN while no partition reports one).
type sample struct{ t, rows, lag float64 }

func run(ctx context.Context, o options) error {
	bin, err := filepath.Abs(o.bin)
	if err != nil {
		return err
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("the bridge binary: %w (run make build)", err)
	}
	pgVersion, err := resetPostgres(ctx, o.pgURL)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, err := resetPostgres(cctx, o.pgURL); err != nil {
			fmt.Fprintf(os.Stderr, "metricschart: clean up: %v\n", err)
		}
	}()

	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(o.partitions), topic))
	if err != nil {
		return fmt.Errorf("start the in-process Kafka: %w", err)
	}
	defer cluster.Close()
	brokers := strings.Join(cluster.ListenAddrs(), ",")
	prod, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.DefaultProduceTopic(topic),
		kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(100_000))
	if err != nil {
		return err
	}
	defer prod.Close()
	var produced atomic.Int64
	fmt.Printf("producing a backlog of %d records to %s (%d partitions)...\n", o.backlog, topic, o.partitions)
	if err := produceN(ctx, prod, o.backlog, &produced); err != nil {
		return err
	}

	addr, err := livebridge.FreeAddr()
	if err != nil {
		return err
	}
	var logBuf livebridge.LogBuffer
	cmd := exec.CommandContext(ctx, bin, "run",
		"--kafka-brokers", brokers, "--kafka-group", group, "--topic", topic,
		"--pg-url", o.pgURL, "--pg-table", table,
		"--kafka-fetch-max-wait", "100ms", "--kafka-heartbeat-interval", "500ms",
		"--progress-interval", "0", "--metrics-addr", addr, "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = &logBuf, &logBuf
	cmd.Env = livebridge.Env(os.Environ())
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", bin, err)
	}
	started := time.Now()
	// exited is closed once the bridge has been reaped; waitErr is its exit
	// status then.
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	defer func() {
		_ = cmd.Process.Kill() // no-op error once it exited
		<-exited
	}()
	fmt.Printf("bridge %s started, /metrics on %s; producing %d records/s for %s with a burst of %d at %s\n",
		bin, addr, o.rate, o.duration, o.burst, o.duration/2)

	// The producer runs while the scraper below samples /metrics.
	var wg sync.WaitGroup
	var prodErr error
	burstAt := o.duration / 2
	wg.Go(func() { prodErr = produceAtRate(ctx, prod, o.rate, o.duration, burstAt, o.burst, &produced) })

	samples, err := scrapeUntilCaughtUp(ctx, "http://"+addr+"/metrics", o.interval, started, &produced, &wg, exited)
	wg.Wait()
	if err != nil {
		return fmt.Errorf("%w\nbridge log:\n%s", err, logBuf.String())
	}
	if prodErr != nil {
		return fmt.Errorf("produce: %w", prodErr)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		if waitErr != nil {
			return fmt.Errorf("the bridge exited with %w after SIGTERM\nbridge log:\n%s", waitErr, logBuf.String())
		}
	case <-time.After(time.Minute):
		return errors.New("the bridge did not exit within a minute of SIGTERM")
	}

	chart := buildChart(o, samples, produced.Load(), pgVersion, burstAt)
	if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err != nil {
		return err
	}
	f, err := os.Create(o.out)
	if err != nil {
		return err
	}
	if err := chart.WriteSVG(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Printf("wrote %s: %d samples over %.1fs\n", o.out, len(samples), samples[len(samples)-1].t)
	return nil
}

// scrapeUntilCaughtUp samples /metrics every interval until the producer is
// done (wg) and the bridge reports every produced record committed with zero
// lag, plus two seconds of tail.
func scrapeUntilCaughtUp(ctx context.Context, url string, interval time.Duration, started time.Time,
	produced *atomic.Int64, producing *sync.WaitGroup, exited <-chan struct{}) ([]sample, error) {
	producerDone := make(chan struct{})
	go func() { producing.Wait(); close(producerDone) }()
	client := &http.Client{Timeout: 2 * time.Second}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	deadline := time.Now().Add(5 * time.Minute)
	var samples []sample
	var caughtUpAt time.Time
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-exited:
			return nil, errors.New("the bridge exited before it caught up")
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			return nil, errors.New("the bridge did not catch up within 5 minutes")
		}
		// The time of the request, not of the answer: the values are read
		// when the request arrives.
		at := time.Since(started).Seconds()
		body, err := livebridge.Get(ctx, client, url)
		if err != nil {
			continue // not listening yet
		}
		s := sample{t: at, lag: math.NaN()}
		s.rows, _ = livebridge.Sum(body, "kafka2pg_ingest_rows_total")
		if lag, ok := livebridge.Sum(body, "kafka2pg_reader_partition_lag_records"); ok {
			s.lag = lag
		}
		samples = append(samples, s)
		select {
		case <-producerDone:
		default:
			continue
		}
		if caughtUpAt.IsZero() && s.rows >= float64(produced.Load()) && s.lag == 0 {
			caughtUpAt = time.Now()
		}
		if !caughtUpAt.IsZero() && time.Since(caughtUpAt) >= 2*time.Second {
			return samples, nil
		}
	}
}

func buildChart(o options, samples []sample, produced int64, pgVersion string, burstAt time.Duration) *svgchart.Chart {
	// The counter is 0 when the process starts, before /metrics answers.
	rows := []svgchart.Point{{T: 0, V: 0}}
	var lag []svgchart.Point
	for _, s := range samples {
		rows = append(rows, svgchart.Point{T: s.t, V: s.rows})
		lag = append(lag, svgchart.Point{T: s.t, V: s.lag})
	}
	rate := svgchart.Rate(rows, 1)
	peakRate, peakLag := 0.0, 0.0
	for _, p := range rate {
		peakRate = max(peakRate, p.V)
	}
	for _, p := range lag {
		if !math.IsNaN(p.V) {
			peakLag = max(peakLag, p.V)
		}
	}
	fmt.Printf("peak %.0f rows/s, peak lag %.0f records, %d records\n", peakRate, peakLag, produced)
	return &svgchart.Chart{
		Title: "kafka2pg under load: rows committed per second and lag, from its own /metrics",
		Notes: []string{
			fmt.Sprintf("%s JSON records to %d partitions: a backlog of %s before the bridge started, then %s records/s for %s,",
				figures.Num(float64(produced), 0), o.partitions, figures.Num(float64(o.backlog), 0), figures.Num(float64(o.rate), 0), o.duration),
			fmt.Sprintf("with %s more at once at %s. One bridge with default flags; in-process Kafka (kfake); PostgreSQL %s on the same machine.",
				figures.Num(float64(o.burst), 0), burstAt, pgVersion),
			fmt.Sprintf("/metrics scraped every %s; rows/s is the increase over the trailing second. %s, commit %s, %d CPUs.",
				o.interval, time.Now().UTC().Format("2006-01-02"), o.commit, runtime.NumCPU()),
		},
		XLabel: "seconds since the bridge started",
		Panels: []svgchart.Panel{
			{Title: "rows/s committed: rate of kafka2pg_ingest_rows_total", YLabel: "rows/s", Color: "#1f77b4", Points: rate},
			{Title: "lag: sum of kafka2pg_reader_partition_lag_records over partitions", YLabel: "records", Color: "#d62728", Points: lag},
		},
		Markers: []svgchart.Marker{
			{T: burstAt.Seconds(), Label: fmt.Sprintf("burst of %s", figures.Num(float64(o.burst), 0))},
			{T: o.duration.Seconds(), Label: "producer stops"},
		},
	}
}

// produceN produces n records and waits until Kafka acknowledged them.
func produceN(ctx context.Context, cl *kgo.Client, n int, produced *atomic.Int64) error {
	var failed atomic.Value
	produceAsync(ctx, cl, n, produced, &failed)
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	if err, _ := failed.Load().(error); err != nil {
		return err
	}
	return nil
}

// produceAsync hands n records to the client; produced counts the
// acknowledged ones, failed keeps a produce error.
func produceAsync(ctx context.Context, cl *kgo.Client, n int, produced *atomic.Int64, failed *atomic.Value) {
	for range n {
		cl.Produce(ctx, record(int(nextID.Add(1))), func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Store(err)
				return
			}
			produced.Add(1)
		})
	}
}

// nextID numbers the records.
var nextID atomic.Int64

// produceAtRate produces about rate records per second for d, and burst
// more at once when burstAt has passed; then it waits until Kafka
// acknowledged them all.
func produceAtRate(ctx context.Context, cl *kgo.Client, rate int, d, burstAt time.Duration, burst int, produced *atomic.Int64) error {
	const tick = 10 * time.Millisecond
	perTick := max(1, rate/int(time.Second/tick))
	t := time.NewTicker(tick)
	defer t.Stop()
	var failed atomic.Value
	start := time.Now()
	burstDone := false
	for time.Since(start) < d {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if !burstDone && time.Since(start) >= burstAt {
			burstDone = true
			produceAsync(ctx, cl, burst, produced, &failed)
		}
		produceAsync(ctx, cl, perTick, produced, &failed)
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	if err, _ := failed.Load().(error); err != nil {
		return err
	}
	return nil
}

var pages = []string{"/", "/pricing", "/docs", "/docs/exactly-once", "/blog/copy-vs-insert", "/signup"}

func record(id int) *kgo.Record {
	user := id % 5000
	return &kgo.Record{
		Key: fmt.Appendf(nil, "u%04d", user),
		Value: fmt.Appendf(nil, `{"event_id":%d,"user_id":"u%04d","page":%q,"duration_ms":%d,"ts":%q}`,
			id, user, pages[id%len(pages)], 50+id%30000, time.Now().UTC().Format(time.RFC3339Nano)),
	}
}

// resetPostgres drops the chart's table and its group's offsets, and returns
// the server version.
func resetPostgres(ctx context.Context, url string) (string, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return "", fmt.Errorf("connect to Postgres: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP TABLE IF EXISTS "+pgx.Identifier{"public", table}.Sanitize()); err != nil {
		return "", fmt.Errorf("drop table %s: %w", table, err)
	}
	if _, err := conn.Exec(ctx, `DO $$ BEGIN
		IF to_regclass('kafka2pg.offsets') IS NOT NULL THEN
			DELETE FROM kafka2pg.offsets WHERE consumer_group = '`+group+`';
		END IF; END $$`); err != nil {
		return "", fmt.Errorf("delete the offsets of group %s: %w", group, err)
	}
	var version string
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		return "", fmt.Errorf("SHOW server_version: %w", err)
	}
	if v, _, ok := strings.Cut(version, " "); ok {
		version = v
	}
	return version, nil
}

// describeCommit names the work tree's commit: a short hash, with
// "+uncommitted changes" when the tree is dirty; "unknown" without git.
func describeCommit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	commit := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		commit += " + uncommitted changes"
	}
	return commit
}
