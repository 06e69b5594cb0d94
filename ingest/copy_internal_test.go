package ingest

import (
	"bytes"
	"testing"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/stream"
)

// The typed mapper gives each COPY an AppendRow of its own: appendFuncOf
// must recognise it, or every row goes through the shared pooled state.
func TestAppendFuncOfTakesTheTypedMappersOwnState(t *testing.T) {
	t.Parallel()
	m, err := decode.NewJSONMapper(decode.MappingSpec{Table: "t", Columns: []decode.ColumnSpec{{Name: "id", Path: "id", Type: "bigint"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := RowAppender(m).(interface{ AppendRowFunc() appendFunc }); !ok {
		t.Fatal("*decode.JSONMapper's AppendRowFunc does not match appendFuncOf's interface")
	}
	f, g := appendFuncOf(m), appendFuncOf(m)
	oids := []uint32{20}
	enc := func(int, []byte, any) ([]byte, error) { t.Fatal("handed to the encoder"); return nil, nil }
	a, errA := f(&stream.Record{Value: []byte(`{"id":1}`)}, nil, oids, enc)
	b, errB := g(&stream.Record{Value: []byte(`{"id":2}`)}, nil, oids, enc)
	c, errC := m.AppendRow(&stream.Record{Value: []byte(`{"id":1}`)}, nil, oids, enc)
	if errA != nil || errB != nil || errC != nil || !bytes.Equal(a, c) || bytes.Equal(a, b) {
		t.Fatalf("own-state appends %x, %x (%v, %v), AppendRow %x (%v)", a, b, errA, errB, c, errC)
	}
}
