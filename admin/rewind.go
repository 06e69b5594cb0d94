package admin

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/kafka2pg/kafka2pg/deadletters"
	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/sinks"
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

// RewindMode is how a reset treats the rows of a table it moves back.
type RewindMode int

const (
	RewindDelete  RewindMode = iota // delete the rows at or past the new offset
	RewindNoTable                   // the table does not exist: nothing to delete
	RewindUpsert                    // records written again rewrite their rows
	RewindUnique                    // records written again conflict: dead letters, no second row
	RewindRefused                   // records written again would duplicate rows
)

// RewindTarget is the table of one topic, as a reset that moves the
// topic's partitions back treats it.
type RewindTarget struct {
	Table string // quoted, qualified; "" when the topic has no sink
	Mode  RewindMode
	Why   string // what the mode means here, or why it is refused and the fix

	topicCol, partCol, offCol string // RewindDelete: quoted; topicCol "" when the table has one topic
}

// offsetColumns are the columns of a sink's table that say which record a
// row came from, as the sink's mapping names them (not yet checked against
// the table): the zero-config table's, or a typed sink's metadata.
func offsetColumns(specs []sinks.Sink, topic string, sink ingest.Sink) (topicCol, partCol, offCol string) {
	if _, raw := sink.Mapper.(decode.RawMapper); raw {
		return "kafka_topic", "kafka_partition", "kafka_offset"
	}
	for _, sc := range specs {
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
// treats its table. specs are the sinks' config; deleteRows is
// ResetRequest.DeleteRows; gathered are the other topics whose sinks write
// the same table.
func planRewind(ctx context.Context, q ingest.Querier, specs []sinks.Sink, topic string, sink ingest.Sink, found, deleteRows bool, gathered []string) (RewindTarget, error) {
	if !found {
		return RewindTarget{Mode: RewindRefused, Why: fmt.Sprintf("no sink of this configuration reads topic %q, so reset cannot tell which table holds its rows: "+
			"give reset the run's --config (or its --pg-table), or --allow-duplicates", topic)}, nil
	}
	t := RewindTarget{Table: sink.Table.QualifiedName()}
	if sink.Router != nil && sink.Upsert != nil {
		t.Mode, t.Why = RewindUpsert, "upsert: the records read again rewrite their keys' rows in the tables they route to, no row is deleted"
		return t, nil
	}
	if sink.Router != nil {
		t.Mode, t.Why = RewindRefused, "the sink routes by content into many tables, and reset does not delete the rows read again from each of them: "+
			"delete them by hand (the rows at or past the new offset, in every table the template names), or give --allow-duplicates"
		return t, nil
	}
	have, err := ingest.ReadCatalog(ctx, q, t.Table)
	if err != nil {
		return t, err
	}
	if !have.Exists() {
		t.Mode, t.Why = RewindNoTable, "the table does not exist: nothing to delete"
		return t, nil
	}
	if sink.Upsert != nil {
		t.Mode, t.Why = RewindUpsert, "upsert: the records read again rewrite their keys' rows, no row is deleted"
		return t, nil
	}
	topicName, partName, offName := offsetColumns(specs, topic, sink)
	pc, hasPart := have.Column(partName)
	oc, hasOff := have.Column(offName)
	tc, hasTopic := have.Column(topicName)
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
		err := q.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %s WHERE %s IS NULL OR %s IS NULL`, t.Table,
			schema.QuoteIdent(partName), schema.QuoteIdent(offName))).Scan(&unknown)
		if err != nil {
			return t, fmt.Errorf("count the rows of %s without a partition or offset: %w", t.Table, err)
		}
		if unknown > 0 {
			cannot = fmt.Sprintf("%d of its rows have no partition or offset (written before the columns were added), so they cannot be found: "+
				"re-ingest into a new table, or give --allow-duplicates", unknown)
		}
	}
	if cannot == "" && deleteRows {
		t.Mode, t.partCol, t.offCol = RewindDelete, schema.QuoteIdent(partName), schema.QuoteIdent(offName)
		if hasTopic {
			t.topicCol = schema.QuoteIdent(tc.Name)
		}
		t.Why = "the rows at or past the new offset are deleted in the reset's transaction; the bridge writes them again"
		return t, nil
	}
	if !deleteRows && cannot == "" {
		cannot = "--delete-rewound-rows=false keeps the rows the records read again write a second time: give --allow-duplicates if that is what you want"
	}
	if len(have.UniqueKeys) > 0 {
		t.Mode, t.Why = RewindUnique, "a unique index: the records read again that conflict with rows already there become dead letters (unique_violation), no second row"
		return t, nil
	}
	t.Mode, t.Why = RewindRefused, "the records read again would be written a second time: "+cannot
	return t, nil
}

// rewound is the condition on t's rows that the records of topic's
// partition at or past from wrote, with its arguments.
func (t RewindTarget) rewound(topic string, partition int32, from int64) (where string, args []any) {
	if t.topicCol == "" {
		return fmt.Sprintf("%s = $1 AND %s >= $2", t.partCol, t.offCol), []any{partition, from}
	}
	return fmt.Sprintf("%s = $1 AND %s = $2 AND %s >= $3", t.topicCol, t.partCol, t.offCol), []any{topic, partition, from}
}

// countRewound counts the rows of t (RewindDelete) and the dead letters of
// group that the records of topic's partition at or past from wrote.
func countRewound(ctx context.Context, q ingest.Querier, t RewindTarget, group, topic string, partition int32, from int64) (rows, letters int64, err error) {
	if t.Mode == RewindDelete {
		where, args := t.rewound(topic, partition, from)
		if err := q.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %s WHERE %s", t.Table, where), args...).Scan(&rows); err != nil {
			return 0, 0, fmt.Errorf("count the rows of %s/%d at or past offset %d in %s: %w", topic, partition, from, t.Table, err)
		}
	}
	if letters, err = deadletters.CountFrom(ctx, q, group, topic, partition, from); err != nil {
		return 0, 0, err
	}
	return rows, letters, nil
}

// deleteRewound deletes, in the reset's transaction, what countRewound
// counts, and returns how many of each it deleted.
func deleteRewound(ctx context.Context, tx pgx.Tx, t RewindTarget, group, topic string, partition int32, from int64) (rows, letters int64, err error) {
	if t.Mode == RewindDelete {
		where, args := t.rewound(topic, partition, from)
		tag, err := tx.Exec(ctx, fmt.Sprintf("DELETE FROM %s WHERE %s", t.Table, where), args...)
		if err != nil {
			return 0, 0, fmt.Errorf("delete the rows of %s/%d at or past offset %d from %s: %w", topic, partition, from, t.Table, err)
		}
		rows = tag.RowsAffected()
	}
	if letters, err = deadletters.DeleteFrom(ctx, tx, group, topic, partition, from); err != nil {
		return 0, 0, err
	}
	return rows, letters, nil
}
