package demo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka2pg/kafka2pg/bridge"
	"github.com/kafka2pg/kafka2pg/reader"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/sinks"
)

// Config is what a demo runs: a zero field takes the default
// DefaultConfig holds, but PostgresURL, which is required.
type Config struct {
	PostgresURL string        // the database the demo writes, in table public.<Topic>
	Topic       string        // the demo topic, and its table
	Partitions  int32         // partitions of the demo topic
	Duration    time.Duration // how long the producer writes events
	Rate        int           // events per second the producer aims at
}

// DefaultConfig holds the defaults of Config's fields.
var DefaultConfig = Config{Topic: "page_views", Partitions: 4, Duration: 5 * time.Second, Rate: 20000}

// Run runs the whole path: an in-process Kafka (kfake), a producer of
// page-view events, a bridge on the zero-config table, and a few queries
// over what landed. It writes its progress and the queries' results to
// out, and gives log to the bridge. It returns when the queries are
// printed, or at the first failure.
func Run(ctx context.Context, cfg Config, out io.Writer, log *slog.Logger) error {
	def := DefaultConfig
	cfg.Topic = cmp.Or(cfg.Topic, def.Topic)
	cfg.Partitions = cmp.Or(cfg.Partitions, def.Partitions)
	cfg.Duration = cmp.Or(cfg.Duration, def.Duration)
	cfg.Rate = cmp.Or(cfg.Rate, def.Rate)
	switch {
	case cfg.PostgresURL == "":
		return errors.New("demo: PostgresURL is empty")
	case cfg.Rate < 0 || cfg.Duration < 0 || cfg.Partitions < 0:
		return errors.New("demo: Rate, Duration and Partitions must not be negative")
	}
	return run(ctx, out, log, cfg.PostgresURL, cfg.Topic, cfg.Partitions, cfg.Duration, cfg.Rate)
}

func run(ctx context.Context, stdout io.Writer, log *slog.Logger, pgURL, topic string, partitions int32, duration time.Duration, rate int) error {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topic))
	if err != nil {
		return fmt.Errorf("start the in-process Kafka: %w", err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	fmt.Fprintf(stdout, "in-process Kafka (kfake) on %s, topic %q with %d partitions\n", strings.Join(brokers, ","), topic, partitions)

	// The table starts empty so the queries show this run only.
	table := schema.TableNameForTopic(topic)
	if err := resetDemoTable(ctx, pgURL, table); err != nil {
		return err
	}

	prod, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return err
	}
	defer prod.Close()
	var produced atomic.Int64
	var prodErr atomic.Value
	prodCtx, stopProd := context.WithTimeout(ctx, duration)
	defer stopProd()
	var wg sync.WaitGroup
	wg.Go(func() { producePageViews(ctx, prodCtx, prod, rate, &produced, &prodErr) })

	// The zero-config table, and the library's defaults but for a demo's
	// quicker fetches and heartbeats.
	set, err := sinks.Config{Sinks: []sinks.Sink{{Topic: topic, Table: table, Schema: "public", Format: "json"}}}.Build(ctx, nil)
	if err != nil {
		return err
	}
	b, err := bridge.New(bridge.Config{
		Kafka: reader.Config{Brokers: brokers, Group: "kafka2pg-demo", Topics: []string{topic},
			FetchMaxWait: 100 * time.Millisecond, HeartbeatInterval: 500 * time.Millisecond},
		Sinks:            set,
		PostgresURL:      pgURL,
		ProgressInterval: -1, // the demo prints its own
	}, log, nil)
	if err != nil {
		return err
	}

	adm := kadm.NewClient(prod)
	start := time.Now()
	progress := func() {
		st := b.Stats()
		lag := int64(-1)
		if ends, err := adm.ListEndOffsets(ctx, topic); err == nil {
			var end int64
			ends.Each(func(o kadm.ListedOffset) { end += o.Offset })
			lag = end - st.Records
		}
		fmt.Fprintf(stdout, "  %5.1fs  produced %8d  read %8d  (%6.0f records/s)  lag %6d  committed batches %5d\n",
			time.Since(start).Seconds(), produced.Load(), st.Records, float64(st.Records)/time.Since(start).Seconds(), lag, st.Batches)
	}
	bridgeCtx, stopBridge := context.WithCancel(ctx)
	defer stopBridge()
	bridgeErr := make(chan error, 1)
	go func() { bridgeErr <- b.Run(bridgeCtx) }()
	var printing sync.WaitGroup
	defer printing.Wait()
	printing.Go(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-bridgeCtx.Done():
				return
			case <-tick.C:
				if st := b.Stats(); st.Partitions > 0 || st.Batches > 0 { // in the group
					progress()
				}
			}
		}
	})

	fmt.Fprintf(stdout, "producing page views for %s and ingesting them into Postgres...\n", duration)
	wg.Wait()
	if e, _ := prodErr.Load().(error); e != nil {
		stopBridge()
		<-bridgeErr
		return fmt.Errorf("produce: %w", e)
	}
	total := produced.Load()
	fmt.Fprintf(stdout, "producer done: %d events; waiting for the bridge to catch up...\n", total)
	if err := waitRows(ctx, pgURL, table, total, bridgeErr); err != nil {
		stopBridge()
		return err
	}
	stopBridge()
	if err := <-bridgeErr; err != nil {
		return err
	}
	elapsed := time.Since(start)
	fmt.Fprintf(stdout, "caught up: %d rows in %.1fs\n\n", total, elapsed.Seconds())
	return printDemoQueries(ctx, stdout, pgURL, table)
}

var demoPages = []string{"/", "/pricing", "/docs", "/docs/exactly-once", "/blog/copy-vs-insert", "/signup", "/login", "/changelog"}
var demoCountries = []string{"DE", "US", "FR", "BR", "IN", "JP", "NG", "CA"}

// producePageViews produces about rate events per second until stopProducing
// ends; records already handed to the client are flushed under ctx.
func producePageViews(ctx, stopProducing context.Context, cl *kgo.Client, rate int, produced *atomic.Int64, failed *atomic.Value) {
	const tick = 10 * time.Millisecond
	perTick := max(1, rate/int(time.Second/tick))
	t := time.NewTicker(tick)
	defer t.Stop()
	rng := rand.New(rand.NewPCG(1, 2))
	id := 0
	for {
		select {
		case <-stopProducing.Done():
			if err := cl.Flush(ctx); err != nil {
				failed.Store(err)
			}
			return
		case <-t.C:
		}
		for range perTick {
			id++
			user := rng.IntN(5000)
			v := fmt.Appendf(nil, `{"event_id":%d,"user_id":"u%04d","page":%q,"country":%q,"duration_ms":%d,"referrer":%q,"ts":%q}`,
				id, user, demoPages[rng.IntN(len(demoPages))], demoCountries[rng.IntN(len(demoCountries))],
				50+rng.IntN(30000), []string{"", "google", "hn", "newsletter"}[rng.IntN(4)], time.Now().UTC().Format(time.RFC3339Nano))
			rec := &kgo.Record{Key: fmt.Appendf(nil, "u%04d", user), Value: v,
				Headers: []kgo.RecordHeader{{Key: "source", Value: []byte("kafka2pg-demo")}}}
			cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
				if err == nil {
					produced.Add(1)
				} else if ctx.Err() == nil {
					failed.Store(err)
				}
			})
		}
	}
}

func resetDemoTable(ctx context.Context, pgURL, table string) error {
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return fmt.Errorf("connect to Postgres: %w", err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP TABLE IF EXISTS "+pgx.Identifier{"public", table}.Sanitize())
	if err == nil {
		// The demo group starts from scratch too.
		_, err = conn.Exec(ctx, `DO $$ BEGIN
			IF to_regclass('kafka2pg.offsets') IS NOT NULL THEN
				DELETE FROM kafka2pg.offsets WHERE consumer_group = 'kafka2pg-demo';
			END IF; END $$`)
	}
	if err != nil {
		return fmt.Errorf("reset the demo table: %w", err)
	}
	return nil
}

func waitRows(ctx context.Context, pgURL, table string, want int64, bridgeErr <-chan error) error {
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		var n int64
		err := conn.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{"public", table}.Sanitize()).Scan(&n)
		if err == nil && n >= want {
			return nil
		}
		select {
		case err := <-bridgeErr:
			return fmt.Errorf("the bridge stopped early: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("the bridge did not ingest %d rows within 2 minutes", want)
}

func printDemoQueries(ctx context.Context, w io.Writer, pgURL, table string) error {
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	t := pgx.Identifier{"public", table}.Sanitize()
	queries := []struct{ title, sql string }{
		{"rows, and exactly-once: distinct (partition, offset) pairs",
			"SELECT count(*) AS rows, count(DISTINCT (kafka_partition, kafka_offset)) AS distinct_offsets FROM " + t},
		{"top pages", "SELECT value->>'page' AS page, count(*) AS views, round(avg((value->>'duration_ms')::int))::int AS avg_ms FROM " + t +
			" GROUP BY 1 ORDER BY 2 DESC LIMIT 5"},
		{"views by country", "SELECT value->>'country' AS country, count(*) AS views FROM " + t + " GROUP BY 1 ORDER BY 2 DESC LIMIT 8"},
		{"durable offsets in kafka2pg.offsets (the source of truth)",
			"SELECT topic, partition, next_offset, epoch, to_char(updated_at, 'HH24:MI:SS') AS updated FROM kafka2pg.offsets WHERE consumer_group = 'kafka2pg-demo' ORDER BY partition"},
	}
	for _, q := range queries {
		fmt.Fprintf(w, "-- %s\n%s;\n", q.title, q.sql)
		if err := printQuery(ctx, w, conn, q.sql); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	return nil
}

func printQuery(ctx context.Context, w io.Writer, conn *pgx.Conn, sql string) error {
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		return fmt.Errorf("%s: %w", sql, err)
	}
	defer rows.Close()
	var header []string
	for _, f := range rows.FieldDescriptions() {
		header = append(header, f.Name)
	}
	table := [][]string{header}
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return err
		}
		line := make([]string, len(vals))
		for i, v := range vals {
			line[i] = fmt.Sprint(v)
		}
		table = append(table, line)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	widths := make([]int, len(header))
	for _, line := range table {
		for i, c := range line {
			widths[i] = max(widths[i], len(c))
		}
	}
	for n, line := range table {
		for i, c := range line {
			fmt.Fprintf(w, " %-*s ", widths[i], c)
			if i < len(line)-1 {
				fmt.Fprint(w, "|")
			}
		}
		fmt.Fprintln(w)
		if n == 0 {
			for i := range header {
				fmt.Fprint(w, strings.Repeat("-", widths[i]+2))
				if i < len(header)-1 {
					fmt.Fprint(w, "+")
				}
			}
			fmt.Fprintln(w)
		}
	}
	return nil
}
