package bridge

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
)

// The start line names each sink's table as schema.table, one attribute a
// topic, in text and in JSON: not Go's map syntax with escaped SQL quotes.
func TestTheStartLineNamesTablesPlainly(t *testing.T) {
	sinks := map[string]ingest.Sink{
		"orders":     {Table: decode.RawTable("public", "orders", decode.ValueJSON)},
		"web.clicks": {Table: decode.RawTable("events", "web_clicks", decode.ValueJSON)},
	}
	var text, js bytes.Buffer
	slog.New(slog.NewTextHandler(&text, nil)).Info("kafka2pg running", tableNames(sinks))
	slog.New(slog.NewJSONHandler(&js, nil)).Info("kafka2pg running", tableNames(sinks))
	if want := "tables.orders=public.orders tables.web.clicks=events.web_clicks\n"; !strings.HasSuffix(text.String(), want) {
		t.Errorf("text log %q, want it to end in %q", text.String(), want)
	}
	if want := `"tables":{"orders":"public.orders","web.clicks":"events.web_clicks"}`; !strings.Contains(js.String(), want) {
		t.Errorf("JSON log %s, want %s", js.String(), want)
	}
	for _, bad := range []string{"map[", `\"`} {
		if strings.Contains(text.String()+js.String(), bad) {
			t.Errorf("the start line holds %q:\n%s%s", bad, text.String(), js.String())
		}
	}
}
