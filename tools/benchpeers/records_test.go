package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestRecordsAreConnectEnvelopes: every record decodes as a JsonConverter
// envelope whose payload has exactly the schema's fields, in its order of
// types, and is about the size the comparison states.
func TestRecordsAreConnectEnvelopes(t *testing.T) {
	for _, d := range []dataset{{name: "new", n: 1000}, {name: "updates", n: 1000, updates: true}} {
		for i := range d.n {
			id := d.id(i)
			var env struct {
				Schema struct {
					Type   string `json:"type"`
					Fields []struct {
						Field, Type string
						Optional    bool
					} `json:"fields"`
				} `json:"schema"`
				Payload map[string]any `json:"payload"`
			}
			v := appendValue(nil, i, id)
			if err := json.Unmarshal(v, &env); err != nil {
				t.Fatalf("%s record %d is not JSON: %v\n%s", d.name, i, err, v)
			}
			if env.Schema.Type != "struct" || len(env.Schema.Fields) != 12 || len(env.Payload) != 12 {
				t.Fatalf("%s record %d: schema type %q with %d fields, payload with %d: want a struct of 12", d.name, i, env.Schema.Type, len(env.Schema.Fields), len(env.Payload))
			}
			for _, f := range env.Schema.Fields {
				if _, ok := env.Payload[f.Field]; !ok {
					t.Fatalf("%s record %d: payload lacks %q", d.name, i, f.Field)
				}
			}
			if got := int64(env.Payload["id"].(float64)); got != id {
				t.Fatalf("%s record %d: payload id %d, key %d", d.name, i, got, id)
			}
		}
		if b := d.meanRecordBytes(); b < 930 || b > 990 {
			t.Errorf("%s records are %.0f bytes on average: the comparison says about 960", d.name, b)
		}
	}
}

// TestUpdatesBringOneNewKeyInTen: the updates dataset brings a new key with
// every tenth record and otherwise updates a key an earlier record of the
// same partition brought, and final() agrees with a replay.
func TestUpdatesBringOneNewKeyInTen(t *testing.T) {
	d := dataset{name: "updates", n: 10_000, updates: true}
	seen := map[int64]int{}
	last := map[int64]int64{}
	newKeys := 0
	for i := range d.n {
		id := d.id(i)
		if first, ok := seen[id]; ok {
			if first >= i || partition(d.id(first)) != partition(id) {
				t.Fatalf("record %d updates key %d of record %d", i, id, first)
			}
		} else {
			newKeys++
			seen[id] = i
		}
		last[id] = int64(i)
	}
	if newKeys != d.n/10 {
		t.Fatalf("%d new keys in %d records, want %d", newKeys, d.n, d.n/10)
	}
	f := d.final(true)
	var sum int64
	for _, s := range last {
		sum += s
	}
	if f.rows != int64(len(last)) || f.seqSum != sum || len(f.last) != partitions {
		t.Fatalf("final: %d rows, seq sum %d, %d partition ends; replay: %d rows, seq sum %d", f.rows, f.seqSum, len(f.last), len(last), sum)
	}
	updated := 0
	for _, first := range seen {
		if last[d.id(first)] != int64(first) {
			updated++
		}
	}
	if updated < len(seen)/2 {
		t.Fatalf("only %d of %d keys were updated: the updates bunch on few keys", updated, len(seen))
	}
}

// TestChangesAreDebeziumEvents: every changes record is a Debezium
// envelope keyed by its id with the key's schema; the ops are 10% creates,
// about 1% deletes (each of a live key, with the previous row as before)
// and updates of live keys otherwise; the last event of every partition is
// not a delete (the done check of the JDBC sink looks for it), and final()
// agrees with a replay of the events.
func TestChangesAreDebeziumEvents(t *testing.T) {
	d := newChanges(20_000)
	type row struct {
		ID  int64 `json:"id"`
		Seq int64 `json:"seq"`
	}
	state := map[int64]int64{}
	ops := map[string]int{}
	lastOp := map[int32]string{}
	for i := range d.n {
		k, v := d.appendRecord(nil, nil, i)
		var key struct {
			Schema  struct{ Name string } `json:"schema"`
			Payload struct{ ID int64 }    `json:"payload"`
		}
		var env struct {
			Schema struct {
				Name   string
				Fields []struct {
					Field  string
					Fields []struct{ Field string }
				}
			} `json:"schema"`
			Payload struct {
				Before, After *row
				Op            string
				Source        struct{ Table string }
			} `json:"payload"`
		}
		if err := json.Unmarshal(k, &key); err != nil {
			t.Fatalf("event %d: key is not JSON: %v\n%s", i, err, k)
		}
		if err := json.Unmarshal(v, &env); err != nil {
			t.Fatalf("event %d: value is not JSON: %v\n%s", i, err, v)
		}
		if key.Payload.ID != d.id(i) || key.Schema.Name != "bench.public.events.Key" {
			t.Fatalf("event %d: key %s, want id %d", i, k, d.id(i))
		}
		if env.Schema.Name != "bench.public.events.Envelope" || len(env.Schema.Fields) != 8 || len(env.Schema.Fields[1].Fields) != 12 || env.Payload.Source.Table != "events" {
			t.Fatalf("event %d: not a Debezium envelope of the 12 fields:\n%s", i, v)
		}
		p := env.Payload
		ops[p.Op]++
		lastOp[partition(d.id(i))] = p.Op
		prev, live := state[d.id(i)]
		switch p.Op {
		case "c":
			if live || p.Before != nil || p.After == nil || p.After.Seq != int64(i) {
				t.Fatalf("event %d: a create of key %d (live %t): %s", i, d.id(i), live, v)
			}
			state[d.id(i)] = int64(i)
		case "u":
			if !live || p.Before != nil || p.After == nil || p.After.ID != d.id(i) || p.After.Seq != int64(i) {
				t.Fatalf("event %d: an update of key %d (live %t): %s", i, d.id(i), live, v)
			}
			state[d.id(i)] = int64(i)
		case "d":
			if !live || p.After != nil || p.Before == nil || p.Before.ID != d.id(i) || p.Before.Seq != prev {
				t.Fatalf("event %d: a delete of key %d (live %t, row of seq %d): %s", i, d.id(i), live, prev, v)
			}
			delete(state, d.id(i))
		default:
			t.Fatalf("event %d: op %q", i, p.Op)
		}
	}
	if ops["c"] != d.n/10 || ops["d"] < d.n/200 || ops["d"] > d.n/50 || ops["u"] != d.n-ops["c"]-ops["d"] {
		t.Fatalf("ops %v in %d events: want 10%% creates, about 1%% deletes", ops, d.n)
	}
	if c, u, del := d.changeCounts(); c != ops["c"] || u != ops["u"] || del != ops["d"] || d.records() != d.n+del {
		t.Fatalf("changeCounts %d, %d, %d and records %d; the events hold %v", c, u, del, d.records(), ops)
	}
	for p, op := range lastOp {
		if op == "d" {
			t.Errorf("the last event of partition %d is a delete", p)
		}
	}
	f := d.final(true)
	var sum int64
	for _, s := range state {
		sum += s
	}
	if f.rows != int64(len(state)) || f.seqSum != sum || len(f.fold) != len(state) || len(f.last) != partitions {
		t.Fatalf("final: %d rows, seq sum %d, %d partition ends; replay: %d rows, seq sum %d", f.rows, f.seqSum, len(f.last), len(state), sum)
	}
	for id, seq := range state {
		if f.fold[id] != seq {
			t.Fatalf("fold: key %d at seq %d, replay %d", id, f.fold[id], seq)
		}
	}
}

// TestRefusalIsFoundInTheLog: the harness reports "not run" only for the
// line that refuses format debezium sinks, not for another failure.
func TestRefusalIsFoundInTheLog(t *testing.T) {
	log := "time=1 level=INFO msg=start\nkafka2pg: the format debezium sink(s) at line(s) 2 are valid, but this build's writer does not apply change events yet: use format connect_json\n"
	if got := refusal(log); !strings.HasPrefix(got, "kafka2pg: the format debezium sink(s)") {
		t.Errorf("refusal found %q", got)
	}
	if got := refusal("kafka2pg: connect to Postgres: refused\n"); got != "" {
		t.Errorf("refusal found %q in another failure", got)
	}
}
