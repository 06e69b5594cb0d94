package cdc

import (
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/stream"
)

// A Decoder is used by the partitions of its table at once: records of
// two schema versions (the schema found by its bytes, and by its id),
// decoded from several goroutines, give each its own row. Run with -race.
func TestOneDecoderDecodesFromManyGoroutines(t *testing.T) {
	reg := newAvroRegistry()
	for _, c := range []struct {
		name string
		d    *Decoder
		recs []stream.Record
	}{
		{"json", mustDecoder(t, Config{}), []stream.Record{fixture(t, "pg_customers_create.json"), otherSchemaText(fixture(t, "pg_customers_update_pk.json"))}},
		{"avro", avroDecoder(t, reg), []stream.Record{
			{Key: avroRecord(t, 2, customersKeyAvro, map[string]any{"id": int32(1)}), Value: avroEvent(t, "c", nil, avroRow(1, "Sally"))},
			{Key: avroRecord(t, 2, customersKeyAvro, map[string]any{"id": int32(2)}), Value: avroEvent(t, "c", nil, avroRow(2, "Anne"))},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := make([]stream.Change, len(c.recs))
			for i, rec := range c.recs {
				ch, err := decodeGrowing(t, c.d, rec)
				if err != nil {
					t.Fatal(err)
				}
				want[i] = ch.Change
			}
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for g := range 8 {
				wg.Go(func() {
					var ch stream.Change
					for n := range 500 {
						i := (g + n) % len(c.recs)
						rec := c.recs[i]
						if err := c.d.Decode(&rec, &ch); err != nil && !errors.Is(err, decode.ErrTableChanged) {
							errs <- err
							return
						}
						if !reflect.DeepEqual(ch.Row, want[i].Row) || !reflect.DeepEqual(ch.Key, want[i].Key) {
							errs <- errors.New("a row or key differs from the one decoded alone")
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
		})
	}
}

// otherSchemaText gives rec's value a schema of another text and the same
// fields (a version number), so that records alternate between two.
func otherSchemaText(rec stream.Record) stream.Record {
	rec.Value = []byte(strings.Replace(string(rec.Value), `"name":"shop.public.customers.Envelope","version":2`, `"name":"shop.public.customers.Envelope","version":3`, 1))
	return rec
}
