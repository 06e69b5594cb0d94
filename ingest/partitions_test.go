package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

// partSink is a typed sink of topic events into events(id, created_at,
// amount): by upsert on key (none: append), partitioned as part says
// (nil: the table as it is).
func partSink(t *testing.T, key []string, part *schema.RangePartition) ingest.Sink {
	t.Helper()
	m, err := decode.NewJSONMapper(decode.MappingSpec{Table: "events", Key: key, Columns: []decode.ColumnSpec{
		{Name: "id", Type: "bigint", NotNull: true},
		{Name: "created_at", Type: "timestamptz", NotNull: true},
		{Name: "amount", Type: "integer"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	s := ingest.Sink{Table: m.Table(), Mapper: m}
	s.Table.Partition = part
	if key != nil {
		s.Upsert = &ingest.Upsert{Key: key}
	}
	return s
}

type partEvent struct {
	id     int
	at     time.Time
	amount int
}

func partBatch(epoch, first int64, evs ...partEvent) *stream.Batch {
	b := &stream.Batch{Topic: "events", Epoch: epoch, PrevOffset: prevOf(first), FirstOffset: first, NextOffset: first + int64(len(evs))}
	for i, e := range evs {
		b.Records = append(b.Records, stream.Record{Topic: "events", Offset: first + int64(i),
			Value: fmt.Appendf(nil, `{"id":%d,"created_at":%q,"amount":%d}`, e.id, e.at.Format(time.RFC3339), e.amount)})
	}
	return b
}

// partWriter is a writer of topic events into sink, its table prepared
// (after ddl, run first), partition 0 claimed at epoch.
func partWriter(t *testing.T, sink ingest.Sink, ddl ...string) (*ingest.Writer, *pgxpool.Pool, int64) {
	t.Helper()
	_, pool := pgtest.MigratedPool(t)
	for _, q := range ddl {
		if _, err := pool.Exec(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	w, epoch := claimed(t, pool, ingest.Config{Group: "g", Sinks: map[string]ingest.Sink{"events": sink}}, "events")
	return w, pool, epoch
}

// checkPlacement checks every row of events, as "id@partition=amount" by
// id and partition, against want, and that there are no dead letters.
func checkPlacement(t *testing.T, pool *pgxpool.Pool, want string) {
	t.Helper()
	q := `SELECT coalesce(string_agg(id || '@' || tableoid::regclass::text || '=' || amount, ' ' ORDER BY id, tableoid::regclass::text), ''),
       (SELECT count(*) FROM kafka2pg.dead_letters) FROM events`
	var rows string
	var dead int
	if err := pool.QueryRow(t.Context(), q).Scan(&rows, &dead); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	if rows != want || dead != 0 {
		t.Errorf("%s\n  = %s, %d dead letters\nwant %s, 0", q, rows, dead, want)
	}
}

func TestUpsertIntoATableKafka2pgPartitionsLandsEachRowInItsMonth(t *testing.T) {
	t.Parallel()
	month := schema.RangePartition{Column: "created_at", Interval: schema.Month, Premake: 2}
	w, pool, epoch := partWriter(t, partSink(t, []string{"id", "created_at"}, &month))
	start := month.Start(time.Now())
	at := func(months int) time.Time { return start.AddDate(0, months, 0).Add(36 * time.Hour) }
	ctx := context.Background()
	if err := w.Write(ctx, partBatch(epoch, 0, partEvent{1, at(0), 10}, partEvent{2, at(1), 20}, partEvent{3, at(2), 30}, partEvent{1, at(0), 11})); err != nil {
		t.Fatal(err)
	}
	// Key 5 is 14 months back, outside the partitions made ahead.
	if err := w.Write(ctx, partBatch(epoch, 4, partEvent{2, at(1), 21}, partEvent{3, at(2), 31}, partEvent{4, at(2), 40}, partEvent{5, at(-14), 50})); err != nil {
		t.Fatal(err)
	}
	name := func(months int) string { return "events_p" + start.AddDate(0, months, 0).Format("200601") }
	want := fmt.Sprintf("1@%s=11 2@%s=21 3@%s=31 4@%s=40 5@%s=50", name(0), name(1), name(2), name(2), name(-14))
	checkPlacement(t, pool, want)
	var kind string
	if err := pool.QueryRow(ctx, `SELECT pg_get_partkeydef('events'::regclass)`).Scan(&kind); err != nil || kind != "RANGE (created_at)" {
		t.Errorf("pg_get_partkeydef(events) = %q, %v; want RANGE (created_at)", kind, err)
	}
}

// A key's record with another created_at is another key: the upsert
// inserts a row in the new time's partition, and the old row stays. (With
// the partition column outside the key Postgres would move the row on
// UPDATE, but no unique index could hold such a key.)
func TestAnUpsertThatChangesThePartitionColumnIsANewRow(t *testing.T) {
	t.Parallel()
	month := schema.RangePartition{Column: "created_at", Interval: schema.Month, Premake: 1}
	w, pool, epoch := partWriter(t, partSink(t, []string{"id", "created_at"}, &month))
	start := month.Start(time.Now())
	if err := w.Write(context.Background(), partBatch(epoch, 0, partEvent{1, start, 10}, partEvent{1, start.AddDate(0, 1, 0), 11})); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("1@events_p%s=10 1@events_p%s=11", start.Format("200601"), start.AddDate(0, 1, 0).Format("200601"))
	checkPlacement(t, pool, want)
}

func TestUpsertIntoAnExistingPartitionedTableUpdatesRowsInPlace(t *testing.T) {
	t.Parallel()
	ddl := []string{
		`CREATE TABLE events (id bigint NOT NULL, created_at timestamptz NOT NULL, amount integer,
    PRIMARY KEY (id, created_at)) PARTITION BY RANGE (created_at)`,
		`CREATE TABLE events_a PARTITION OF events FOR VALUES FROM ('2026-01-01Z') TO ('2026-01-02Z')`,
		`CREATE TABLE events_b PARTITION OF events FOR VALUES FROM ('2026-01-02Z') TO ('2026-01-03Z')`,
		`CREATE TABLE events_c PARTITION OF events FOR VALUES FROM ('2026-01-03Z') TO ('2026-02-01Z')`,
	}
	w, pool, epoch := partWriter(t, partSink(t, []string{"id", "created_at"}, nil), ddl...)
	day := func(d int) time.Time { return time.Date(2026, 1, d, 12, 0, 0, 0, time.UTC) }
	ctx := context.Background()
	if err := w.Write(ctx, partBatch(epoch, 0, partEvent{1, day(1), 10}, partEvent{2, day(2), 20}, partEvent{3, day(3), 30})); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, partBatch(epoch, 3, partEvent{1, day(1), 11}, partEvent{3, day(3), 31}, partEvent{4, day(20), 40})); err != nil {
		t.Fatal(err)
	}
	want := "1@events_a=11 2@events_b=20 3@events_c=31 4@events_c=40"
	checkPlacement(t, pool, want)
}

func TestAppendCreatesThePartitionsOfRowsOutsideTheCreatedRange(t *testing.T) {
	t.Parallel()
	daily := schema.RangePartition{Column: "created_at", Interval: schema.Day, Premake: 1}
	w, pool, epoch := partWriter(t, partSink(t, nil, &daily))
	today := daily.Start(time.Now())
	past, far := today.AddDate(-1, 0, 0).Add(time.Hour), today.AddDate(0, 0, 40).Add(23*time.Hour)
	ctx := context.Background()
	b := partBatch(epoch, 0, partEvent{1, today.Add(time.Minute), 10}, partEvent{2, past, 20}, partEvent{3, far, 30}, partEvent{4, today.AddDate(0, 0, 1), 40})
	if err := w.Write(ctx, b); err != nil {
		t.Fatal(err)
	}
	name := func(at time.Time) string { return "events_p" + at.Format("20060102") }
	want := fmt.Sprintf("1@%s=10 2@%s=20 3@%s=30 4@%s=40", name(today), name(past), name(far), name(today.AddDate(0, 0, 1)))
	checkPlacement(t, pool, want)
	var parts int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_inherits WHERE inhparent = 'events'::regclass`).Scan(&parts); err != nil || parts != 4 {
		t.Errorf("events has %d partitions (%v); want 4: today, tomorrow (premade), and the two the rows outside needed", parts, err)
	}
}

// A date column's partitions take its rows by day, those made ahead and
// one a row outside needs.
func TestAppendByADateColumn(t *testing.T) {
	t.Parallel()
	weekly := schema.RangePartition{Column: "day", Interval: schema.Week, Premake: 0}
	m, err := decode.NewJSONMapper(decode.MappingSpec{Table: "events", Columns: []decode.ColumnSpec{
		{Name: "id", Type: "bigint", NotNull: true}, {Name: "day", Type: "date", NotNull: true}, {Name: "amount", Type: "integer"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	sink := ingest.Sink{Table: m.Table(), Mapper: m}
	sink.Table.Partition = &weekly
	w, pool, epoch := partWriter(t, sink)
	monday := weekly.Start(time.Now())
	b := &stream.Batch{Topic: "events", Epoch: epoch, PrevOffset: -1, FirstOffset: 0, NextOffset: 2, Records: []stream.Record{
		{Topic: "events", Offset: 0, Value: fmt.Appendf(nil, `{"id":1,"day":%q,"amount":10}`, monday.AddDate(0, 0, 6).Format(time.DateOnly))},
		{Topic: "events", Offset: 1, Value: fmt.Appendf(nil, `{"id":2,"day":%q,"amount":20}`, monday.AddDate(0, 0, 7).Format(time.DateOnly))},
	}}
	if err := w.Write(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("1@events_p%s=10 2@events_p%s=20", monday.Format("20060102"), monday.AddDate(0, 0, 7).Format("20060102"))
	checkPlacement(t, pool, want)
}

func TestRowsOutsideAPartitionedTableLandInItsDefaultPartition(t *testing.T) {
	t.Parallel()
	// The table's own DEFAULT partition holds a row of this month: this
	// month's partition cannot be made and is left to it; next month's is
	// premade; a row beyond is not refused, so it stays in the default.
	month := schema.RangePartition{Column: "created_at", Interval: schema.Month, Premake: 1}
	now := time.Now()
	ddl := []string{
		`CREATE TABLE events (id bigint NOT NULL, created_at timestamptz NOT NULL, amount integer) PARTITION BY RANGE (created_at)`,
		`CREATE TABLE events_rest PARTITION OF events DEFAULT`,
		fmt.Sprintf(`INSERT INTO events VALUES (0, '%s', 0)`, now.UTC().Format(time.RFC3339)),
	}
	w, pool, epoch := partWriter(t, partSink(t, nil, &month), ddl...)
	next := month.End(month.Start(now))
	b := partBatch(epoch, 0, partEvent{1, now, 10}, partEvent{2, next.Add(time.Hour), 20}, partEvent{3, next.AddDate(0, 2, 0), 30})
	if err := w.Write(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("0@events_rest=0 1@events_rest=10 2@events_p%s=20 3@events_rest=30", next.Format("200601"))
	checkPlacement(t, pool, want)
}

func TestAnUpsertKeyWithoutThePartitionKeyIsRefused(t *testing.T) {
	t.Parallel()
	_, pool := pgtest.MigratedPool(t)
	ctx := context.Background()
	q := `CREATE TABLE events (id bigint NOT NULL, created_at timestamptz NOT NULL, amount integer,
    PRIMARY KEY (id, created_at)) PARTITION BY RANGE (created_at)`
	if _, err := pool.Exec(ctx, q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	w, err := ingest.New(pool, ingest.Config{Group: "g", Sinks: map[string]ingest.Sink{"events": partSink(t, []string{"id"}, nil)}})
	if err != nil {
		t.Fatal(err)
	}
	err = w.EnsureTables(ctx, true)
	var pk *ingest.PartitionKeyError
	if !errors.As(err, &pk) || strings.Join(pk.Lacks, ",") != "created_at" || pk.PartitionKey != "RANGE (created_at)" {
		t.Fatalf("EnsureTables = %v; want a *PartitionKeyError lacking created_at of RANGE (created_at)", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "upsert key (id)") || !strings.Contains(msg, "add created_at to the sink's key") {
		t.Errorf("EnsureTables = %q; want it to name the key (id) and the fix", msg)
	}
}

func TestPartitionByRefusesATableNotPartitionedByItsRange(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, ddl, want string }{
		{"not partitioned", `CREATE TABLE events (id bigint NOT NULL, created_at timestamptz NOT NULL, amount integer)`,
			"exists and is not partitioned, and the sink sets partition_by created_at"},
		{"partitioned by a list", `CREATE TABLE events (id bigint NOT NULL, created_at timestamptz NOT NULL, amount integer) PARTITION BY LIST (created_at)`,
			"is partitioned by LIST (created_at), and the sink sets partition_by created_at (RANGE)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, pool := pgtest.MigratedPool(t)
			ctx := context.Background()
			if _, err := pool.Exec(ctx, c.ddl); err != nil {
				t.Fatalf("%s: %v", c.ddl, err)
			}
			sink := partSink(t, nil, &schema.RangePartition{Column: "created_at", Interval: schema.Day})
			w, err := ingest.New(pool, ingest.Config{Group: "g", Sinks: map[string]ingest.Sink{"events": sink}})
			if err != nil {
				t.Fatal(err)
			}
			if err := w.EnsureTables(ctx, true); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("EnsureTables = %v; want %q", err, c.want)
			}
		})
	}
}

// Two writers (two instances) meet the same missing partitions at once:
// the DDL lock lets one create each, and both write every row.
func TestWritersThatNeedTheSamePartitionsAtOnceBothWrite(t *testing.T) {
	t.Parallel()
	daily := schema.RangePartition{Column: "created_at", Interval: schema.Day, Premake: 0}
	sink := partSink(t, nil, &daily)
	_, pool := pgtest.MigratedPool(t)
	cfg := ingest.Config{Group: "g", Sinks: map[string]ingest.Sink{"events": sink}}
	ctx := context.Background()
	far := daily.Start(time.Now()).AddDate(0, 0, 30)
	errs := make(chan error, 2)
	for p := range int32(2) {
		w := readyWriter(t, pool, cfg)
		pos, err := w.Claim(ctx, "events", []int32{p})
		if err != nil {
			t.Fatal(err)
		}
		var evs []partEvent
		for d := range 5 {
			evs = append(evs, partEvent{int(p)*10 + d, far.AddDate(0, 0, d).Add(time.Hour), d})
		}
		b := partBatch(pos[p].Epoch, 0, evs...)
		b.Partition = p
		for i := range b.Records {
			b.Records[i].Partition = p
		}
		go func() { errs <- w.Write(ctx, b) }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	var rows, parts, dead int
	q := `SELECT count(*), count(DISTINCT tableoid), (SELECT count(*) FROM kafka2pg.dead_letters) FROM events`
	if err := pool.QueryRow(ctx, q).Scan(&rows, &parts, &dead); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	if rows != 10 || parts != 5 || dead != 0 {
		t.Errorf("%s = %d rows in %d partitions, %d dead letters; want 10 in 5, 0", q, rows, parts, dead)
	}
}
