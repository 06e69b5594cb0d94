package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka2pg/kafka2pg/pgcopy"
	"github.com/kafka2pg/kafka2pg/stream"
	"github.com/kafka2pg/kafka2pg/tools/internal/procfs"
)

// pollMaxRecords caps a baseline's poll: 5,000 rows × 10 columns keeps a
// multi-row INSERT under Postgres' 65,535 bind parameters.
const pollMaxRecords = 5_000

// runBaseline consumes n records of topic into the table of kind (typedTable
// or rawTable, with the bridge's mapper) the way the incumbents do: a franz-go consumer group, pgx, and the Kafka offsets
// committed after each poll's write. perRecord (baseline a) sends one INSERT
// per record, each its own round trip, in one transaction per poll; else
// (baseline b) one multi-row INSERT per poll.
func runBaseline(ctx context.Context, e *env, kind, topic string, n int, perRecord bool) (result, error) {
	t, m, err := tableFor(kind)
	if err != nil {
		return result{}, err
	}
	if err := e.resetTable(ctx, t, true); err != nil {
		return result{}, err
	}
	conn, err := pgx.Connect(ctx, e.pgURL)
	if err != nil {
		return result{}, fmt.Errorf("connect to Postgres: %w", err)
	}
	defer conn.Close(ctx)
	group := "kafka2pg-bench-" + topic
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.kafka.brokers...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return result{}, fmt.Errorf("kafka consumer: %w", err)
	}
	defer cl.Close()

	cols := t.ColumnNames()
	for i, c := range cols {
		cols[i] = pgx.Identifier{c}.Sanitize()
	}
	insertOne := fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", t.QualifiedName(), strings.Join(cols, ", "), placeholders(0, len(cols)))
	lat := newHistogram(latencyBounds)
	var rows [][]any
	args := make([]any, 0, pollMaxRecords*len(cols))

	runtime.GC()
	rssOK := procfs.ResetPeakRSS()
	oth0, cpu0, pg0, broker0, t0 := e.othersCPU(), selfCPU(), e.pg.CPU(), e.brokerCPU(), time.Now()
	var firstAt, lastAt time.Time
	done := 0
	for done < n {
		fs := cl.PollRecords(ctx, pollMaxRecords)
		if err := fs.Err0(); err != nil {
			return result{}, fmt.Errorf("poll %s: %w", topic, err)
		}
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		if firstAt.IsZero() {
			firstAt = time.Now()
		}
		rows = rows[:0]
		for _, r := range recs {
			row, err := m.Row(&stream.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp,
				TimestampType: stream.TimestampCreateTime, Key: r.Key, Value: r.Value}, nil)
			if err != nil {
				return result{}, fmt.Errorf("map %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
			}
			rows = append(rows, pgcopy.PgxValues(row)) // pgx's types for the numerics
		}
		if perRecord {
			err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				for _, row := range rows {
					if _, err := tx.Exec(ctx, insertOne, row...); err != nil {
						return err
					}
				}
				return nil
			})
		} else {
			args = args[:0]
			for _, row := range rows {
				args = append(args, row...)
			}
			_, err = conn.Exec(ctx, multiInsert(t.QualifiedName(), cols, len(rows)), args...)
		}
		if err != nil {
			return result{}, fmt.Errorf("insert into %s: %w", t.QualifiedName(), err)
		}
		now := time.Now()
		for _, r := range recs {
			lat.observe(max(now.Sub(r.Timestamp).Seconds(), 0))
		}
		// The incumbents' order: the write, then the Kafka commit.
		if err := cl.CommitRecords(ctx, recs...); err != nil {
			return result{}, fmt.Errorf("commit offsets of %s: %w", topic, err)
		}
		done += len(recs)
		lastAt = now
	}
	cpu, pgCPU, oth, brokerCPU := selfCPU()-cpu0, e.pg.CPU()-pg0, e.othersCPU()-oth0, e.brokerCPU()-broker0
	name := "baselineB"
	if perRecord {
		name = "baselineA"
	}
	r := result{Kind: name, Table: kind, Records: n, Wall: lastAt.Sub(t0), Active: lastAt.Sub(firstAt), ActiveRows: done,
		ClientCPU: cpu.Seconds(), PGCPU: pgCPU, BrokerCPU: brokerCPU, OthersCores: oth / lastAt.Sub(t0).Seconds(), P50: lat.quantile(0.5), P99: lat.quantile(0.99), RecordBytes: e.bytesOf(kind)}
	if rssOK {
		r.PeakRSS = procfs.PeakRSS(os.Getpid())
	}
	if r.TableRows, err = e.count(ctx, t); err != nil {
		return result{}, err
	}
	e.logf("%-36s %s", r.title(), r.summary())
	return r, e.dropTable(ctx, t)
}

// placeholders lists $from+1 … $from+n.
func placeholders(from, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "$%d", from+i+1)
	}
	return b.String()
}

// multiInsert is one INSERT of rows rows.
func multiInsert(table string, cols []string, rows int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "INSERT INTO %s (%s) VALUES ", table, strings.Join(cols, ", "))
	for i := range rows {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "(%s)", placeholders(i*len(cols), len(cols)))
	}
	return b.String()
}
