package main

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/kafka2pg/kafka2pg/deadletters"
	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
)

// Moving a partition back (offsets reset to an earlier offset) makes the
// bridge read its records again, and write them again. For that to stay
// exactly once, the reset's transaction, which moves next_offset and bumps
// the epoch, also deletes what those records wrote: their rows, where the
// table says which record a row came from (partition and offset columns,
// and the topic's where the table gathers several topics), and their dead
// letters. An upsert table needs nothing (writing a record again writes
// the same row), nor a table with a unique index (a record written again
// conflicts and becomes a dead letter instead of a second row). Any other
// table would get duplicates: the reset refuses to move back unless told
// --allow-duplicates.

// rewindMode is how a reset treats the rows of a table it moves back.
type rewindMode int

const (
	rewindDelete  rewindMode = iota // delete the rows at or past the new offset
	rewindNoTable                   // the table does not exist: nothing to delete
	rewindUpsert                    // records written again rewrite their rows
	rewindUnique                    // records written again conflict: dead letters, no second row
	rewindRefused                   // records written again would duplicate rows
)

// rewindTarget is the table of one topic, as a reset that moves the topic's
// partitions back treats it.
type rewindTarget struct {
	table                     string // quoted, qualified; "" when the topic has no sink
	mode                      rewindMode
	topicCol, partCol, offCol string // rewindDelete: quoted; topicCol "" when the table has one topic
	why                       string // what the mode means here, or why it is refused and the fix
}

// offsetColumns are the columns of a sink's table that say which record a
// row came from, as the sink's mapping names them (not yet checked against
// the table): the zero-config table's, or a typed sink's metadata.
func offsetColumns(o *runOptions, topic string, sink ingest.Sink) (topicCol, partCol, offCol string) {
	if _, raw := sink.Mapper.(decode.RawMapper); raw {
		return "kafka_topic", "kafka_partition", "kafka_offset"
	}
	for _, sc := range o.sinks {
		match := sc.Topic == topic
		if sc.TopicRegex != "" {
			match, _ = regexp.MatchString("^(?:"+sc.TopicRegex+")$", topic)
		}
		if match {
			return sc.Metadata.Topic, sc.Metadata.Partition, sc.Metadata.Offset
		}
	}
	return "", "", ""
}

// planRewind works out, in q (read only), how a reset that moves topic back
// treats its table. deleteRows is --delete-rewound-rows; gathered are the
// other topics whose sinks write the same table.
func planRewind(ctx context.Context, q rowQueryer, o *runOptions, topic string, sink ingest.Sink, found, deleteRows bool, gathered []string) (rewindTarget, error) {
	if !found {
		return rewindTarget{mode: rewindRefused, why: fmt.Sprintf("no sink of this configuration reads topic %q, so reset cannot tell which table holds its rows: "+
			"give reset the run's --config (or its --pg-table), or --allow-duplicates", topic)}, nil
	}
	t := rewindTarget{table: sink.Table.QualifiedName()}
	have, err := readCatalogColumns(ctx, q, t.table)
	if err != nil {
		return t, err
	}
	if len(have) == 0 {
		t.mode, t.why = rewindNoTable, "the table does not exist: nothing to delete"
		return t, nil
	}
	if sink.Upsert != nil {
		t.mode, t.why = rewindUpsert, "upsert: the records read again rewrite their keys' rows, no row is deleted"
		return t, nil
	}
	col := func(name string) (catalogColumn, bool) {
		i := slices.IndexFunc(have, func(c catalogColumn) bool { return c.Name == name })
		if name == "" || i < 0 {
			return catalogColumn{}, false
		}
		return have[i], true
	}
	topicName, partName, offName := offsetColumns(o, topic, sink)
	pc, hasPart := col(partName)
	oc, hasOff := col(offName)
	tc, hasTopic := col(topicName)
	var cannot string // why the rows cannot be deleted, when they cannot
	switch {
	case !hasPart || !hasOff:
		cannot = "its rows do not say which record wrote them (no partition and offset columns): add them to the sink, " +
			"metadata: {partition: kafka_partition, offset: kafka_offset} with evolve: true (the rows written before keep NULL there), " +
			"or re-ingest into a new table, or give --allow-duplicates"
	case !hasTopic && len(gathered) > 0:
		cannot = fmt.Sprintf("it gathers topics %s and %s and has no topic column to tell their rows apart: add metadata: {topic: kafka_topic} "+
			"to the sinks, or give --allow-duplicates", topic, strings.Join(gathered, ", "))
	}
	if cannot == "" && (!pc.NotNull || !oc.NotNull) {
		var unknown int64
		err := q.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %s WHERE %s IS NULL OR %s IS NULL`, t.table,
			pgx.Identifier{partName}.Sanitize(), pgx.Identifier{offName}.Sanitize())).Scan(&unknown)
		if err != nil {
			return t, fmt.Errorf("count the rows of %s without a partition or offset: %w", t.table, err)
		}
		if unknown > 0 {
			cannot = fmt.Sprintf("%d of its rows have no partition or offset (written before the columns were added), so they cannot be found: "+
				"re-ingest into a new table, or give --allow-duplicates", unknown)
		}
	}
	if cannot == "" && deleteRows {
		t.mode, t.partCol, t.offCol = rewindDelete, pgx.Identifier{partName}.Sanitize(), pgx.Identifier{offName}.Sanitize()
		if hasTopic {
			t.topicCol = pgx.Identifier{tc.Name}.Sanitize()
		}
		t.why = "the rows at or past the new offset are deleted in the reset's transaction; the bridge writes them again"
		return t, nil
	}
	if !deleteRows && cannot == "" {
		cannot = "--delete-rewound-rows=false keeps the rows the records read again write a second time: give --allow-duplicates if that is what you want"
	}
	var unique bool
	if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_index WHERE indrelid = to_regclass($1) AND indisunique AND indpred IS NULL)`,
		t.table).Scan(&unique); err != nil {
		return t, fmt.Errorf("look for a unique index on %s: %w", t.table, err)
	}
	if unique {
		t.mode, t.why = rewindUnique, "a unique index: the records read again that conflict with rows already there become dead letters (unique_violation), no second row"
		return t, nil
	}
	t.mode, t.why = rewindRefused, "the records read again would be written a second time: "+cannot
	return t, nil
}

// rewound is the condition on t's rows that the records of topic's
// partition at or past from wrote, with its arguments.
func (t rewindTarget) rewound(topic string, partition int32, from int64) (where string, args []any) {
	if t.topicCol == "" {
		return fmt.Sprintf("%s = $1 AND %s >= $2", t.partCol, t.offCol), []any{partition, from}
	}
	return fmt.Sprintf("%s = $1 AND %s = $2 AND %s >= $3", t.topicCol, t.partCol, t.offCol), []any{topic, partition, from}
}

// rowQueryer is what the reset's reads need: a pgx.Tx or a pool.
type rowQueryer interface {
	queryer
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// countRewound counts the rows of t (rewindDelete) and the dead letters of
// group that the records of topic's partition at or past from wrote.
func countRewound(ctx context.Context, q rowQueryer, t rewindTarget, group, topic string, partition int32, from int64) (rows, letters int64, err error) {
	if t.mode == rewindDelete {
		where, args := t.rewound(topic, partition, from)
		if err := q.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %s WHERE %s", t.table, where), args...).Scan(&rows); err != nil {
			return 0, 0, fmt.Errorf("count the rows of %s/%d at or past offset %d in %s: %w", topic, partition, from, t.table, err)
		}
	}
	if letters, err = deadletters.CountFrom(ctx, q, group, topic, partition, from); err != nil {
		return 0, 0, err
	}
	return rows, letters, nil
}

// deleteRewound deletes, in the reset's transaction, what countRewound
// counts, and returns how many of each it deleted.
func deleteRewound(ctx context.Context, tx pgx.Tx, t rewindTarget, group, topic string, partition int32, from int64) (rows, letters int64, err error) {
	if t.mode == rewindDelete {
		where, args := t.rewound(topic, partition, from)
		tag, err := tx.Exec(ctx, fmt.Sprintf("DELETE FROM %s WHERE %s", t.table, where), args...)
		if err != nil {
			return 0, 0, fmt.Errorf("delete the rows of %s/%d at or past offset %d from %s: %w", topic, partition, from, t.table, err)
		}
		rows = tag.RowsAffected()
	}
	if letters, err = deadletters.DeleteFrom(ctx, tx, group, topic, partition, from); err != nil {
		return 0, 0, err
	}
	return rows, letters, nil
}
