package main

import (
	"encoding/json"
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
