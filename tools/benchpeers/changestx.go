package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka2pg/kafka2pg/tools/internal/figures"
)

// The changes-tx scenario reads the change events of the changes scenario
// grouped into source transactions of txEvents events, as Debezium's
// Postgres connector writes them with provide.transaction.metadata: each
// event carries its transaction block (the id "txId:LSN" with the event's
// own LSN, total_order and data_collection_order) and its source.txId,
// and a transaction topic of one partition gets a BEGIN and an END record
// per transaction, the END with its event_count in all and for
// public.events (tombstones are no events). kafka2pg applies the same
// events twice: change by change, and with transactions: true. The other
// systems do not run it.

// txEvents is the events of each source transaction of changes-tx (the
// last one may have fewer).
const txEvents = 4

// changesTxKey is the scenario's key.
const changesTxKey = "changes-tx"

// withTransactions is d, a changes dataset, in source transactions of
// txEvents events.
func (d dataset) withTransactions() dataset {
	d.name, d.txEvents = "changestx", txEvents
	return d
}

// txOf is the source transaction of event i of a dataset in transactions
// of size events, and the event's place in it (from 1).
func txOf(i, size int) (tx int64, order int) { return 1000 + int64(i/size), i%size + 1 }

// txEventsOf is how many events source transaction tx holds.
func (d dataset) txEventsOf(tx int64) int {
	first := int(tx-1000) * d.txEvents
	return min(d.txEvents, d.n-first)
}

// txCount is the number of source transactions of d; 0 without.
func (d dataset) txCount() int {
	if d.txEvents == 0 {
		return 0
	}
	return (d.n + d.txEvents - 1) / d.txEvents
}

// eventLSN is the LSN of event i, as appendChange writes it; a
// transaction's commit LSN is its last event's plus 8.
func eventLSN(i int) int64 { return 100_000_000 + int64(i)*64 }

// appendTxBlock appends the transaction block of event i of a dataset in
// transactions of size events; size 0: null.
func appendTxBlock(b []byte, i, size int) []byte {
	if size == 0 {
		return append(b, "null"...)
	}
	tx, order := txOf(i, size)
	b = append(b, `{"id":"`...)
	b = strconv.AppendInt(b, tx, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, eventLSN(i), 10)
	b = append(b, `","total_order":`...)
	b = strconv.AppendInt(b, int64(order), 10)
	b = append(b, `,"data_collection_order":`...)
	b = strconv.AppendInt(b, int64(order), 10)
	return append(b, '}')
}

// txTopicOf names the transaction topic of a changes-tx topic.
func txTopicOf(topic string) string { return topic + "_transaction" }

// txBoundarySchema is the schema of the transaction topic's values, as
// the JsonConverter writes it.
const txBoundarySchema = `{"type":"struct","fields":[{"type":"string","optional":false,"field":"status"},{"type":"string","optional":false,"field":"id"},` +
	`{"type":"int64","optional":true,"field":"event_count"},{"type":"array","items":{"type":"struct","fields":[{"type":"string","optional":false,"field":"data_collection"},` +
	`{"type":"int64","optional":false,"field":"event_count"}],"optional":false},"optional":true,"field":"data_collections"},{"type":"int64","optional":false,"field":"ts_ms"}],` +
	`"optional":false,"name":"io.debezium.connector.common.TransactionMetadataValue","version":1}`

// appendBoundary appends the value of the BEGIN (events 0) or the END of
// source transaction tx, whose id carries lsn.
func appendBoundary(b []byte, tx, lsn int64, events int) []byte {
	b = append(b, `{"schema":`...)
	b = append(b, txBoundarySchema...)
	status := "BEGIN"
	if events > 0 {
		status = "END"
	}
	b = fmt.Appendf(b, `,"payload":{"status":%q,"id":"%d:%d",`, status, tx, lsn)
	if events > 0 {
		b = fmt.Appendf(b, `"event_count":%d,"data_collections":[{"data_collection":"public.events","event_count":%d}]`, events, events)
	} else {
		b = append(b, `"event_count":null,"data_collections":null`...)
	}
	b = fmt.Appendf(b, `,"ts_ms":%d}}`, tsBase+tx)
	return b
}

// fillTransactions creates the transaction topic of topic (one
// partition) and produces a BEGIN and an END record of every source
// transaction of d into it, in order, waiting until Kafka acknowledged
// them. A dataset without transactions has none.
func (k *kafka) fillTransactions(ctx context.Context, topic string, d dataset) error {
	if d.txEvents == 0 {
		return nil
	}
	txTopic := txTopicOf(topic)
	resp, err := k.admin.CreateTopic(ctx, 1, -1, nil, txTopic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("create topic %s: %w", txTopic, err)
	}
	return k.produceAll(ctx, txTopic, func(send func(*kgo.Record)) {
		for t := range d.txCount() {
			tx := int64(1000 + t)
			first := t * d.txEvents
			events := d.txEventsOf(tx)
			key := fmt.Appendf(nil, `{"id":"%d"}`, tx)
			send(&kgo.Record{Topic: txTopic, Partition: 0, Key: key, Value: appendBoundary(nil, tx, eventLSN(first)-8, 0)})
			send(&kgo.Record{Topic: txTopic, Partition: 0, Key: key, Value: appendBoundary(nil, tx, eventLSN(first+events-1)+8, events)})
		}
	})
}

// withTxTopics is the topics of a run and the transaction topics of
// those of datasets with transactions, for their deletion.
func withTxTopics(topics map[string]string) []string {
	var out []string
	for name, topic := range topics {
		out = append(out, topic)
		if name == (dataset{}).withTransactions().name {
			out = append(out, txTopicOf(topic))
		}
	}
	return out
}

// kafka2pgTxConfig is kafka2pg's sink of changes-tx with transactions:
// true.
func kafka2pgTxConfig(topic, table string) string {
	return kafka2pgChangeConfig(topic, table) + "    transactions: true\n    transaction_topic: " + txTopicOf(topic) + "\n"
}

// txPeers are the systems that run only changes-tx: kafka2pg with
// transactions: true, when chosen holds the scenario.
func txPeers(k2p *kafka2pgSystem, chosen []scenario) []system {
	for _, sc := range chosen {
		if sc.data.txEvents > 0 {
			tx := *k2p
			tx.transactions = true
			return []system{&tx}
		}
	}
	return nil
}

// appliedTx is how many records of the transaction topic kafka2pg's
// group has applied (cdc_appliers.applied_tx_offset: the END last
// applied + 1).
func (d *db) appliedTx(ctx context.Context, group string) (int64, error) {
	n, err := d.scalar(ctx, `SELECT coalesce(max(applied_tx_offset), 0)::bigint FROM kafka2pg.cdc_appliers WHERE consumer_group = $1`, group)
	if err != nil && strings.Contains(err.Error(), "does not exist") {
		return 0, nil // kafka2pg has not created its schema yet
	}
	return n, err
}

// txLabel is the label of kafka2pg with transactions: true.
const txLabel = "kafka2pg, transactions: true"

// txMarkdown is the report's section on changes-tx: kafka2pg's events/s
// change by change and with transactions: true, and their ratio.
func txMarkdown(rep *report) string {
	var b strings.Builder
	for _, row := range rep.summaryOf([]string{"kafka2pg", txLabel}) {
		if row.sc.data.txEvents == 0 {
			continue
		}
		r0, c0, p0, m0 := row.cells(0)
		r1, c1, p1, m1 := row.cells(1)
		ratio := "–"
		if row.ran() && row.rate[0].N > 0 && row.rate[1].N > 0 {
			ratio = figures.Num(row.rate[1].Med/row.rate[0].Med, 2) + "x"
		}
		fmt.Fprintf(&b, "## Transaction-consistent apply (`transactions: true`)\n\n")
		fmt.Fprintf(&b, "kafka2pg alone, on the change events above grouped into source transactions of %d events (%s transactions): each event carries its transaction block, and a transaction topic of one partition holds a BEGIN and an END record per transaction, as Debezium's Postgres connector writes them with `provide.transaction.metadata` (tools/benchpeers/changestx.go). The same events are applied change by change (the sink above) and with `transactions: true` (staged, then applied one source transaction after another, whole). Events/s counts the change events; with `transactions: true`, the first row is the first source transaction applied, once its events are staged from every partition, and the last row the commit of the last one's apply: the rate from the start includes the staging before the first row.\n\n",
			txEvents, figures.Num(float64(row.sc.data.txCount()), 0))
		fmt.Fprintf(&b, "| | change by change | `transactions: true` | ratio |\n|---|---|---|---|\n")
		fmt.Fprintf(&b, "| events/s (first row to last) | %s | %s | %s |\n", r0, r1, ratio)
		var wall [2]figures.Spread
		for i, sys := range []string{"kafka2pg", txLabel} {
			wall[i] = figures.SpreadOver(rep.series(row.sc.key, sys), result.wallRate)
		}
		wallRatio := "–"
		if wall[0].N > 0 && wall[1].N > 0 {
			wallRatio = figures.Num(wall[1].Med/wall[0].Med, 2) + "x"
		}
		fmt.Fprintf(&b, "| events/s from the start (staging included) | %s | %s | %s |\n", wall[0].Format(0), wall[1].Format(0), wallRatio)
		fmt.Fprintf(&b, "| CPU s per 1M events | %s | %s | |\n| Postgres CPU s per 1M events | %s | %s | |\n| peak RSS MiB | %s | %s | |\n\n", c0, c1, p0, p1, m0, m1)
		fmt.Fprintf(&b, "```yaml\n%s```\n\n", kafka2pgTxConfig("TOPIC", "peers_kafka2pgtx"))
	}
	return b.String()
}
