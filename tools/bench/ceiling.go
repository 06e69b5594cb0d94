package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/pgcopy"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
	"github.com/kafka2pg/kafka2pg/tools/internal/procfs"
)

// batchRows is the rows per transaction of the ceiling, as of the bridge
// (its --batch-max-rows default).
const batchRows = 10_000

// rowMapper is what the ceiling and the baselines need of a schema mapper.
type rowMapper interface {
	Row(r *stream.Record, dst []any) ([]any, error)
}

// tableFor returns the table and the mapper the bridge uses for kind
// (typedTable, rawTable, smallTable or upsertTable).
func tableFor(kind string) (schema.Table, rowMapper, error) {
	if kind == rawTable || kind == smallTable {
		return decode.RawTable("public", kind, decode.ValueJSON), decode.RawMapper{Format: decode.ValueJSON}, nil
	}
	spec := typedSpec()
	if kind == upsertTable {
		spec = upsertSpec()
	}
	m, err := decode.NewJSONMapper(spec)
	if err != nil {
		return schema.Table{}, nil, fmt.Errorf("typed mapping: %w", err)
	}
	return m.Table(), m, nil
}

// batch is one ceiling transaction: the rows of one partition.
type batch struct {
	partition int32
	rows      [][]any
}

// buildBatches builds the rows the bridge writes for records 0..n-1 of
// topic (the zero-config table stores its name, in its primary key too, so
// the ceiling writes the name the bridge will): per partition, in offset order, cut in batches of batchRows, and
// ordered round-robin over the partitions (batch 0 of every partition, then
// batch 1, ...), the order in which a bridge's partitions commit.
func buildBatches(kind, topic string, n int) (schema.Table, []batch, error) {
	t, m, err := tableFor(kind)
	if err != nil {
		return t, nil, err
	}
	ts, value := time.Now(), valueOf(kind)
	perPartition := make([][][]any, partitions)
	for id := range n {
		row, err := m.Row(schemaRecord(topic, id, ts, value), nil)
		if err != nil {
			return t, nil, fmt.Errorf("build row %d: %w", id, err)
		}
		p := partitionOf(id)
		perPartition[p] = append(perPartition[p], row)
	}
	var out []batch
	for start := 0; ; start += batchRows {
		added := false
		for p, rows := range perPartition {
			if start >= len(rows) {
				continue
			}
			out = append(out, batch{partition: int32(p), rows: rows[start:min(start+batchRows, len(rows))]})
			added = true
		}
		if !added {
			return t, out, nil
		}
	}
}

// copyBatches COPYs batches into t, one transaction each, with the COPY
// encoder kafka2pg writes with (pgcopy.CopyFrom), so that the ceiling and
// the bridge differ only in what the bridge does besides encoding.
func copyBatches(ctx context.Context, conn *pgx.Conn, t schema.Table, batches []batch) error {
	cols := t.ColumnNames()
	for _, b := range batches {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			_, err := pgcopy.CopyFrom(ctx, tx, t.Ident(), cols, pgx.CopyFromRows(b.rows))
			return err
		})
		if err != nil {
			return fmt.Errorf("copy into %s: %w", t.QualifiedName(), err)
		}
	}
	return nil
}

// runCeilings measures binary COPY of the rows of n records of kind from
// topic, on one connection and then on two (each taking every other
// partition).
func runCeilings(ctx context.Context, e *env, kind, topic string, n int) ([]result, error) {
	t, batches, err := buildBatches(kind, topic, n)
	if err != nil {
		return nil, err
	}
	defer func() {
		batches = nil
		runtime.GC()
		debug.FreeOSMemory()
	}()
	var out []result
	for _, conns := range []int{1, 2} {
		if err := e.resetTable(ctx, t, true); err != nil {
			return nil, err
		}
		lanes := make([][]batch, conns)
		for _, b := range batches {
			lanes[int(b.partition)%conns] = append(lanes[int(b.partition)%conns], b)
		}
		cs, err := connectN(ctx, e, conns)
		if err != nil {
			return nil, err
		}
		r, err := timed(ctx, e, cs, func(ctx context.Context, i int, c *pgx.Conn) error { return copyBatches(ctx, c, t, lanes[i]) })
		closeAll(ctx, cs)
		if err != nil {
			return nil, err
		}
		r.Kind, r.Table, r.Records, r.ActiveRows, r.RecordBytes = fmt.Sprintf("ceiling%d", conns), kind, n, n, e.bytesOf(kind)
		if r.TableRows, err = e.count(ctx, t); err != nil {
			return nil, err
		}
		e.logf("%-36s %s", r.title(), r.summary())
		out = append(out, r)
	}
	return out, e.dropTable(ctx, t)
}

// connectN opens n connections, with the bridge's encoders, so that the
// ratios compare the pipelines.
func connectN(ctx context.Context, e *env, n int) ([]*pgx.Conn, error) {
	cs := make([]*pgx.Conn, n)
	for i := range cs {
		c, err := pgx.Connect(ctx, e.pgURL)
		if err != nil {
			closeAll(ctx, cs)
			return nil, fmt.Errorf("connect to Postgres: %w", err)
		}
		pgcopy.RegisterNumericCodec(c.TypeMap())
		cs[i] = c
	}
	return cs, nil
}

func closeAll(ctx context.Context, cs []*pgx.Conn) {
	for _, c := range cs {
		if c != nil {
			c.Close(ctx)
		}
	}
}

// timed runs work on every connection of cs at once, and returns its wall
// time with the CPU this process, Postgres and other processes used
// meanwhile, and this process's peak RSS. The caller names the result.
func timed(ctx context.Context, e *env, cs []*pgx.Conn, work func(ctx context.Context, i int, c *pgx.Conn) error) (result, error) {
	runtime.GC()
	rssOK := procfs.ResetPeakRSS()
	oth0, cpu0, pg0, t0 := e.othersCPU(), selfCPU(), e.pg.CPU(), time.Now()
	g, gctx := errgroup.WithContext(ctx)
	for i, c := range cs {
		g.Go(func() error { return work(gctx, i, c) })
	}
	err := g.Wait()
	wall := time.Since(t0)
	cpu, pgCPU, oth := selfCPU()-cpu0, e.pg.CPU()-pg0, e.othersCPU()-oth0
	r := result{Wall: wall, Active: wall, ClientCPU: cpu.Seconds(), PGCPU: pgCPU, BrokerCPU: math.NaN(), OthersCores: oth / wall.Seconds(),
		P50: math.NaN(), P99: math.NaN(), RecordBytes: e.recordBytes}
	if rssOK {
		r.PeakRSS = procfs.PeakRSS(os.Getpid())
	}
	return r, err
}
