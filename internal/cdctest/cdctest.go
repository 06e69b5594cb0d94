// Package cdctest reads the change events recorded from a real Debezium
// connector (cdc/testdata/recorded, whose README says how they were made)
// and the source rows they must replicate, for the tests of cdc and
// ingest.
package cdctest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/kafka2pg/kafka2pg/stream"
)

// Events reads the records of one connector's topic of table under dir,
// in offset order, key and value byte for byte, as records of topic. It
// fails the test when the file is missing, unreadable or empty.
func Events(tb testing.TB, dir, connector, table, topic string) []stream.Record {
	tb.Helper()
	f, err := os.Open(filepath.Join(dir, connector, table+".jsonl"))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var recs []stream.Record
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var line struct {
			Offset     int64
			Key, Value json.RawMessage
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			tb.Fatalf("%s/%s.jsonl: %v", connector, table, err)
		}
		r := stream.Record{Topic: topic, Offset: line.Offset}
		if string(line.Key) != "null" {
			r.Key = bytes.Clone(line.Key)
		}
		if string(line.Value) != "null" {
			r.Value = bytes.Clone(line.Value)
		}
		recs = append(recs, r)
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	if len(recs) == 0 {
		tb.Fatalf("%s/%s.jsonl has no records", connector, table)
	}
	return recs
}

// Rows reads expected/<mode>/<table>.<when>.jsonl under dir: each source
// row as its replica prints it, by column.
func Rows(tb testing.TB, dir, mode, table, when string) []map[string]*string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "expected", mode, table+"."+when+".jsonl"))
	if err != nil {
		tb.Fatal(err)
	}
	var rows []map[string]*string
	for line := range bytes.Lines(b) {
		var row map[string]*string
		if err := json.Unmarshal(line, &row); err != nil {
			tb.Fatal(err)
		}
		rows = append(rows, row)
	}
	return rows
}
