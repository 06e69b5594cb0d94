package bridge_test

import (
	"slices"

	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka2pg/kafka2pg/bridge"
	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/kafkatest"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/reader"
	"github.com/kafka2pg/kafka2pg/sinks"
	"github.com/kafka2pg/kafka2pg/stream"
)

// fixture is a topic with records, a database, and the configuration of
// a bridge that writes the topic into its zero-config table.
type fixture struct {
	k       *kafkatest.Kafka
	topic   string
	url     string
	records int
	cfg     bridge.Config
}

func newFixture(t *testing.T, records int) *fixture {
	t.Helper()
	k := kafkatest.New(t)
	topic := k.CreateTopic(t, "bridge", 3)
	var rs []*kgo.Record
	for i := range records {
		rs = append(rs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, `{"n":%d}`, i)})
	}
	k.Produce(t, rs...)
	url := pgtest.URL(t)
	sink := ingest.Sink{Table: decode.RawTable("public", "events", decode.ValueJSON), Mapper: decode.RawMapper{Format: decode.ValueJSON}}
	cfg := bridge.Config{
		Kafka: reader.Config{Brokers: strings.Split(k.Brokers(), ","), Group: "g-" + topic, Topics: []string{topic},
			HeartbeatInterval: 500 * time.Millisecond, FetchMaxWait: 100 * time.Millisecond},
		Sinks:       sinks.Set{Fixed: map[string]ingest.Sink{topic: sink}},
		PostgresURL: url,
	}
	return &fixture{k: k, topic: topic, url: url, records: records, cfg: cfg}
}

// query returns one int64 that sql selects.
func (f *fixture) query(t *testing.T, sql string) int64 {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), f.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(t.Context()))
	var n int64
	if err := conn.QueryRow(t.Context(), sql).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// run runs b in the background; the channel gets what Run returned.
func run(ctx context.Context, b *bridge.Bridge) <-chan error {
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	return done
}

func wait(t *testing.T, done <-chan error, within time.Duration) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(within):
		t.Fatalf("Run did not return within %s", within)
		return nil
	}
}

// A bridge writes each record once, is ready while it runs, and stops
// cleanly on Shutdown: Run returns nil, the offsets in Postgres cover
// every record, and its metrics counted the rows.
func TestRunWritesEachRecordOnceAndShutdownStopsCleanly(t *testing.T) {
	f := newFixture(t, 500)
	reg := prometheus.NewRegistry()
	b, err := bridge.New(f.cfg, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Ready(t.Context()); err == nil || !strings.HasPrefix(err.Error(), "starting") {
		t.Errorf("Ready before Run = %v, want starting", err)
	}
	done := run(t.Context(), b)
	kafkatest.Poll(t, time.Minute, "every record in the table", func() (bool, string) {
		rows := b.Stats().Rows
		return rows == int64(f.records), fmt.Sprintf("%d rows of %d", rows, f.records)
	})
	kafkatest.Poll(t, 30*time.Second, "ready", func() (bool, string) {
		err := b.Ready(t.Context())
		return err == nil, fmt.Sprint(err)
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := b.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown = %v, want nil", err)
	}
	if err := wait(t, done, 10*time.Second); err != nil {
		t.Errorf("Run = %v, want nil after Shutdown", err)
	}
	if n := f.query(t, `SELECT count(DISTINCT (kafka_partition, kafka_offset)) FROM public.events`); n != int64(f.records) {
		t.Errorf("%d distinct records in the table, want %d", n, f.records)
	}
	if n := f.query(t, `SELECT count(*) FROM public.events`); n != int64(f.records) {
		t.Errorf("%d rows, want %d: a record was written twice", n, f.records)
	}
	if n := f.query(t, `SELECT coalesce(sum(next_offset), 0) FROM kafka2pg.offsets WHERE consumer_group = 'g-`+f.topic+`'`); n != int64(f.records) {
		t.Errorf("durable offsets add up to %d, want %d", n, f.records)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var rows float64
	for _, mf := range mfs {
		if mf.GetName() == "kafka2pg_ingest_rows_total" {
			for _, m := range mf.GetMetric() {
				rows += m.GetCounter().GetValue()
			}
		}
	}
	if rows != float64(f.records) {
		t.Errorf("kafka2pg_ingest_rows_total = %v, want %d", rows, f.records)
	}
	if err := b.Ready(t.Context()); err == nil || err.Error() != "stopped" {
		t.Errorf("Ready after Run returned = %v, want stopped", err)
	}
	if err := b.Run(t.Context()); err == nil {
		t.Error("a second Run returned nil: a Bridge runs once")
	}
}

// With UntilCaughtUp, Run returns nil by itself once the table holds what
// the topic had at start.
func TestUntilCaughtUpReturnsOnceEveryPartitionIsWritten(t *testing.T) {
	f := newFixture(t, 300)
	f.cfg.UntilCaughtUp = true
	b, err := bridge.New(f.cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := wait(t, run(t.Context(), b), time.Minute); err != nil {
		t.Fatalf("Run = %v, want nil once caught up", err)
	}
	if n := f.query(t, `SELECT count(*) FROM public.events`); n != int64(f.records) {
		t.Errorf("%d rows after catching up, want %d", n, f.records)
	}
	if st := b.Stats(); st.Rows != int64(f.records) || st.DeadLetters != 0 {
		t.Errorf("Stats: %d rows and %d dead letters, want %d and 0", st.Rows, st.DeadLetters, f.records)
	}
}

// Close stops a running bridge at once, and a Bridge stopped before it ran
// does not run.
func TestCloseStopsAtOnceAndAStoppedBridgeDoesNotRun(t *testing.T) {
	f := newFixture(t, 50)
	b, err := bridge.New(f.cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := run(t.Context(), b)
	kafkatest.Poll(t, time.Minute, "the records written", func() (bool, string) {
		return b.Stats().Rows == int64(f.records), fmt.Sprint(b.Stats().Rows)
	})
	closed := make(chan struct{})
	go func() { b.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return within 10s")
	}
	if err := wait(t, done, time.Second); err != nil {
		t.Errorf("Run after Close = %v, want nil", err)
	}

	for name, stop := range map[string]func(*bridge.Bridge){
		"Close":    func(b *bridge.Bridge) { b.Close() },
		"Shutdown": func(b *bridge.Bridge) { _ = b.Shutdown(t.Context()) },
	} {
		b, err := bridge.New(f.cfg, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		stop(b)
		if err := wait(t, run(t.Context(), b), 5*time.Second); err == nil {
			t.Errorf("Run after %s returned nil, want an error saying a Bridge runs once", name)
		}
	}
}

// The sinks are given once, in Config.Sinks: sinks set on the writer's
// config, which the bridge would overwrite, are refused.
func TestSinksOnTheWriterConfigAreRefused(t *testing.T) {
	sink := ingest.Sink{Table: decode.RawTable("public", "t", decode.ValueJSON), Mapper: decode.RawMapper{Format: decode.ValueJSON}}
	cfg := bridge.Config{Kafka: reader.Config{Brokers: []string{"127.0.0.1:9"}, Group: "g", Topics: []string{"t"}},
		Writer: ingest.Config{Sinks: map[string]ingest.Sink{"t": sink}}, PostgresURL: "postgres://u@127.0.0.1:9/db"}
	if _, err := bridge.New(cfg, nil, nil); err == nil || !strings.Contains(err.Error(), "give the sinks in bridge.Config.Sinks") {
		t.Errorf("New with Writer.Sinks: %v", err)
	}
	cfg.Writer, cfg.Sinks = ingest.Config{}, sinks.Set{Fixed: map[string]ingest.Sink{"t": sink}}
	if _, err := bridge.New(cfg, nil, nil); err != nil {
		t.Errorf("New with Sinks: %v", err)
	}
}

// Two bridges cannot share a registry: their metrics would collide.
func TestTwoBridgesOnOneRegistryAreRefused(t *testing.T) {
	cfg := bridge.Config{Kafka: reader.Config{Brokers: []string{"127.0.0.1:9"}, Group: "g", Topics: []string{"t"}},
		Sinks: sinks.Set{Fixed: map[string]ingest.Sink{"t": {Table: decode.RawTable("public", "t", decode.ValueJSON),
			Mapper: decode.RawMapper{Format: decode.ValueJSON}}}}, PostgresURL: "postgres://u@127.0.0.1:9/db"}
	reg := prometheus.NewRegistry()
	if _, err := bridge.New(cfg, nil, reg); err != nil {
		t.Fatal(err)
	}
	var already prometheus.AlreadyRegisteredError
	if _, err := bridge.New(cfg, nil, reg); !errors.As(err, &already) {
		t.Errorf("a second bridge on the registry: %v, want an AlreadyRegisteredError", err)
	}
}

// Each configuration error names its field, the reader's included, so
// that a program setting them from flags can name the flag.
func TestConfigErrorsNameTheirFields(t *testing.T) {
	cfg := bridge.Config{Kafka: reader.Config{Brokers: []string{"kafka"}, Group: "g", Topics: []string{"t"}},
		KafkaSecurity: reader.Security{TLSCertFile: "c"}, PostgresMaxConns: -1}
	var fields []string
	var walk func(error)
	walk = func(err error) {
		if fe, ok := err.(*stream.FieldError); ok {
			fields = append(fields, fe.Field)
			return
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		t.Errorf("%v: not a *stream.FieldError", err)
	}
	walk(cfg.Validate())
	want := []string{"bridge.Config.PostgresURL", "bridge.Config.PostgresMaxConns", "reader.Config.Brokers", "reader.Security.TLSCertFile"}
	if !slices.Equal(fields, want) {
		t.Errorf("fields %v, want %v", fields, want)
	}
}

// With SkipCreateTables a missing table ends Run with an error on that
// field, which says the bridge may create it.
func TestAMissingTableTheBridgeMayNotCreateNamesSkipCreateTables(t *testing.T) {
	f := newFixture(t, 1)
	f.cfg.SkipCreateTables = true
	b, err := bridge.New(f.cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = wait(t, run(t.Context(), b), time.Minute)
	fe, ok := errors.AsType[*stream.FieldError](err)
	if !ok || fe.Field != "bridge.Config.SkipCreateTables" || !strings.Contains(err.Error(), `table "public"."events" for topic`) {
		t.Errorf("Run = %v, want a *stream.FieldError on bridge.Config.SkipCreateTables naming the table", err)
	}
}
