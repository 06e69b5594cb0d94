package cdc

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/stream"
)

// parseBoundaryJSON is ParseBoundary as it was with encoding/json: the
// oracle the strict reader's parse is held to.
func parseBoundaryJSON(rec *stream.Record) (stream.TxBoundary, bool, error) {
	if rec.Value == nil {
		return stream.TxBoundary{}, false, nil
	}
	var wrapped struct {
		Schema  json.RawMessage `json:"schema"`
		Payload json.RawMessage `json:"payload"`
	}
	body := rec.Value
	if err := json.Unmarshal(rec.Value, &wrapped); err != nil {
		return stream.TxBoundary{}, false, err
	}
	if len(wrapped.Payload) > 0 && string(wrapped.Payload) != "null" {
		body = wrapped.Payload
	}
	var j struct {
		Status          string `json:"status"`
		ID              string `json:"id"`
		EventCount      *int64 `json:"event_count"`
		DataCollections []struct {
			DataCollection string `json:"data_collection"`
			EventCount     int64  `json:"event_count"`
		} `json:"data_collections"`
	}
	if err := json.Unmarshal(body, &j); err != nil {
		return stream.TxBoundary{}, false, err
	}
	if j.ID == "" {
		return stream.TxBoundary{}, false, errors.New("no id")
	}
	j.ID = transactionKey(j.ID)
	switch j.Status {
	case "BEGIN":
		return stream.TxBoundary{ID: j.ID}, true, nil
	case "END":
	default:
		return stream.TxBoundary{}, false, errors.New("status")
	}
	if j.EventCount == nil || *j.EventCount < 0 {
		return stream.TxBoundary{}, false, errors.New("event_count")
	}
	b := stream.TxBoundary{End: true, ID: j.ID, EventCount: *j.EventCount, Collections: make(map[string]int64, len(j.DataCollections))}
	for _, c := range j.DataCollections {
		b.Collections[c.DataCollection] += c.EventCount
	}
	return b, true, nil
}

const boundarySchema = `{"type":"struct","fields":[{"type":"string","optional":false,"field":"status"},{"type":"string","optional":false,"field":"id"},` +
	`{"type":"int64","optional":true,"field":"event_count"},{"type":"array","items":{"type":"struct","fields":[` +
	`{"type":"string","optional":false,"field":"data_collection"},{"type":"int64","optional":false,"field":"event_count"}],"optional":false},` +
	`"optional":true,"field":"data_collections"},{"type":"int64","optional":false,"field":"ts_ms"}],"optional":false,"name":"io.debezium.connector.common.TransactionMetadataValue","version":1}`

var boundaryCases = []string{
	`{"schema":` + boundarySchema + `,"payload":{"status":"BEGIN","id":"571:53195832","event_count":null,"data_collections":null,"ts_ms":1}}`,
	`{"schema":` + boundarySchema + `,"payload":{"status":"END","id":"571:53195832","event_count":3,"data_collections":[{"data_collection":"public.a","event_count":2},{"data_collection":"public.b","event_count":1}],"ts_ms":1}}`,
	`{"payload":{"status":"END","id":"x","event_count":2,"data_collections":[{"data_collection":"a","event_count":1},{"data_collection":"a","event_count":1}]},"schema":null}`,
	`{"status":"END","id":"0-1-2","event_count":0,"data_collections":[]}`,
	`{"status":"BEGIN","id":"file.000003:1234"}`,
	`{"schema":null,"payload":null,"status":"END","id":"t","event_count":1}`,
	`{"status":"END","id":"t","event_count":1,"data_collections":[null,{"event_count":1,"extra":[1,{"a":2}]}]}`,
	`{"status":"END","id":"t","event_count":-1}`,
	`{"status":"END","id":"t"}`,
	`{"status":"COMMIT","id":"t","event_count":1}`,
	`{"status":"END","event_count":1}`,
	`{"status":"END","id":"t","event_count":"3"}`,
	`{"status":"END","id":"t","event_count":3.5}`,
	`{"status":"END","id":"t","event_count":99999999999999999999}`,
	`{"status":"END","id":7,"event_count":1}`,
	`{"status":"END","id":"t","event_count":1,"data_collections":{"a":1}}`,
	`{"status":"END","id":"t","event_count":1,"data_collections":[1]}`,
	`{"schema":{},"payload":"END"}`,
	`{"schema":{},"payload":[1]}`,
	`{"id":"t","id":"u","status":"BEGIN"}`,
	`[]`,
	`1`,
	`"END"`,
	`{"status":"END","id":"t","event_count":1`,
	`{"status":"END","id":"t","event_count":1} x`,
	``,
	`null`,
}

// The strict reader's parse of a transaction topic record gives what
// encoding/json's gave: the same boundary, or a bad record where it
// failed.
func TestParseBoundaryReadsWhatEncodingJSONRead(t *testing.T) {
	for _, in := range boundaryCases {
		rec := &stream.Record{Topic: "t", Value: []byte(in)}
		want, wantOK, wantErr := parseBoundaryJSON(rec)
		got, ok, err := ParseBoundary(rec)
		if (err != nil) != (wantErr != nil) || ok != wantOK || !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v %v %v\nwant %+v %v %v", in, got, ok, err, want, wantOK, wantErr)
		}
		if err != nil && !errors.Is(err, decode.ErrBadRecord) {
			t.Errorf("%s: %v is not a bad record", in, err)
		}
	}
	if _, ok, err := ParseBoundary(&stream.Record{}); ok || err != nil {
		t.Errorf("a tombstone: ok %v err %v, want skipped", ok, err)
	}
}

// What the strict reader accepts, encoding/json read the same way (the
// reader refuses more: invalid UTF-8, lone surrogates, keys in another
// case).
func FuzzParseBoundaryAcceptsOnlyWhatEncodingJSONRead(f *testing.F) {
	for _, in := range boundaryCases {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		rec := &stream.Record{Value: in}
		got, ok, err := ParseBoundary(rec)
		if err != nil {
			return
		}
		want, wantOK, wantErr := parseBoundaryJSON(rec)
		if wantErr != nil || ok != wantOK || !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\n got %+v %v\nwant %+v %v %v", in, got, ok, want, wantOK, wantErr)
		}
	})
}

func BenchmarkParseBoundary(b *testing.B) {
	rec := &stream.Record{Value: []byte(boundaryCases[1])}
	for _, p := range []struct {
		name  string
		parse func(*stream.Record) (stream.TxBoundary, bool, error)
	}{{"reader", ParseBoundary}, {"encoding-json", parseBoundaryJSON}} {
		b.Run(p.name, func(b *testing.B) {
			b.SetBytes(int64(len(rec.Value)))
			for b.Loop() {
				if _, ok, err := p.parse(rec); !ok || err != nil {
					b.Fatal(ok, err)
				}
			}
		})
	}
}
