package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/kafka2pg/kafka2pg/pgcopy"
	"github.com/kafka2pg/kafka2pg/stream"
	"github.com/kafka2pg/kafka2pg/tools/internal/procfs"
)

// pipeTable is the minimal pipe's table: the record values and nothing
// else.
const pipeTable = "bench_pipe"

// pipeConns is the minimal pipe's COPY connections, as many as the
// ceiling's better lane count on two cores.
const pipeConns = 2

// runPipe is the minimal pipe: the floor of "Kafka in, COPY out" on this
// machine. It reads the n records of topic with one franz-go client
// (direct partition consumption from the start, no group, no commits) and
// COPYs each poll's values (binary, pgx.CopyFrom) into a one-column jsonb
// table, on pipeConns connections that take the polls in turn while the
// client fetches the next. It keeps no offsets, checks nothing, has no dead
// letters and no fence: the bridge's ratio to it is what the bridge's own
// work costs, the broker's and the client's share of the cores taken out.
// kind names the block it runs in (its records' shape).
//
// With bridgeRows, the pipe writes what the bridge writes instead: each
// record mapped by the bridge's mapper into kind's own table (the
// zero-config table: its seven columns and primary key), COPYed with the
// bridge's encoder (pgcopy.CopyFrom) in a transaction per poll, so that
// kafka2pg ÷ this pipe leaves the table's cost out too.
func runPipe(ctx context.Context, e *env, kind, topic string, n int, bridgeRows bool) (result, error) {
	ident, cols, name := pgx.Identifier{"public", pipeTable}, []string{"v"}, "pipe"
	var m rowMapper
	if bridgeRows {
		t, mapper, err := tableFor(kind)
		if err != nil {
			return result{}, err
		}
		if err := e.resetTable(ctx, t, true); err != nil {
			return result{}, err
		}
		ident, cols, name, m = t.Ident(), t.ColumnNames(), "pipeRows", mapper
	} else {
		if _, err := e.conn.Exec(ctx, "DROP TABLE IF EXISTS "+ident.Sanitize()+"; CREATE TABLE "+ident.Sanitize()+" (v jsonb)"); err != nil {
			return result{}, fmt.Errorf("create %s: %w", pipeTable, err)
		}
		if err := checkpoint(ctx, e.conn); err != nil {
			return result{}, err
		}
	}
	conns, err := connectN(ctx, e, pipeConns)
	if err != nil {
		return result{}, err
	}
	defer closeAll(context.WithoutCancel(ctx), conns)
	offsets := map[string]map[int32]kgo.Offset{topic: {}}
	for p := range partitions {
		offsets[topic][int32(p)] = kgo.NewOffset().AtStart()
	}

	runtime.GC()
	rssOK := procfs.ResetPeakRSS()
	oth0, cpu0, pg0, broker0, t0 := e.othersCPU(), selfCPU(), e.pg.CPU(), e.brokerCPU(), time.Now()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.kafka.brokers...), kgo.ConsumePartitions(offsets))
	if err != nil {
		return result{}, fmt.Errorf("kafka consumer: %w", err)
	}
	defer cl.Close()
	var (
		firstAt, lastAt time.Time
		mu              sync.Mutex // of lastAt
	)
	polls := make(chan [][]any, pipeConns)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(polls)
		for done := 0; done < n; {
			fs := cl.PollRecords(gctx, batchRows)
			if err := fs.Err0(); err != nil {
				return fmt.Errorf("poll %s: %w", topic, err)
			}
			recs := fs.Records()
			if len(recs) == 0 {
				continue
			}
			if firstAt.IsZero() {
				firstAt = time.Now()
			}
			rows := make([][]any, len(recs))
			for i, r := range recs {
				if m == nil {
					rows[i] = []any{r.Value}
					continue
				}
				row, err := m.Row(&stream.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp,
					TimestampType: stream.TimestampCreateTime, Key: r.Key, Value: r.Value}, nil)
				if err != nil {
					return fmt.Errorf("map %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
				}
				rows[i] = row
			}
			select {
			case polls <- rows:
			case <-gctx.Done():
				return gctx.Err()
			}
			done += len(recs)
		}
		return nil
	})
	for _, c := range conns {
		g.Go(func() error {
			for rows := range polls {
				var err error
				if m == nil {
					_, err = c.CopyFrom(gctx, ident, cols, pgx.CopyFromRows(rows))
				} else {
					err = pgx.BeginFunc(gctx, c, func(tx pgx.Tx) error {
						_, err := pgcopy.CopyFrom(gctx, tx, ident, cols, pgx.CopyFromRows(rows))
						return err
					})
				}
				if err != nil {
					return fmt.Errorf("copy into %s: %w", ident.Sanitize(), err)
				}
				now := time.Now()
				mu.Lock()
				if now.After(lastAt) {
					lastAt = now
				}
				mu.Unlock()
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return result{}, err
	}
	if lastAt.IsZero() {
		return result{}, errors.New("the minimal pipe copied nothing")
	}
	cpu, pgCPU, oth, brokerCPU := selfCPU()-cpu0, e.pg.CPU()-pg0, e.othersCPU()-oth0, e.brokerCPU()-broker0
	r := result{Kind: name, Table: kind, Records: n, Wall: lastAt.Sub(t0), Active: lastAt.Sub(firstAt), ActiveRows: n,
		ClientCPU: cpu.Seconds(), PGCPU: pgCPU, BrokerCPU: brokerCPU, OthersCores: oth / lastAt.Sub(t0).Seconds(),
		P50: math.NaN(), P99: math.NaN(), RecordBytes: e.bytesOf(kind)}
	if rssOK {
		r.PeakRSS = procfs.PeakRSS(os.Getpid())
	}
	if err := e.conn.QueryRow(ctx, "SELECT count(*) FROM "+ident.Sanitize()).Scan(&r.TableRows); err != nil {
		return result{}, fmt.Errorf("count %s: %w", ident.Sanitize(), err)
	}
	e.logf("%-36s %s", r.title(), r.summary())
	if _, err := e.conn.Exec(ctx, "DROP TABLE "+ident.Sanitize()); err != nil {
		return result{}, fmt.Errorf("drop %s: %w", ident.Sanitize(), err)
	}
	return r, nil
}
