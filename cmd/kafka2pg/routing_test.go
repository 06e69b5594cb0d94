package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/kafka2pg/kafka2pg/stream"
)

// The example of docs/MAPPING.md's routing by content loads, each of its
// sinks is routed, and a record of each names the table the page says; a
// typo in a template stops run and check (exit 2) naming the sink's table
// key and the forms a reference takes.
func TestTheRoutingExampleAndATypoInIt(t *testing.T) {
	example := mappingExample(t, "## Routing by content")
	t.Setenv("DATABASE_URL", "postgres://app@127.0.0.1:1/shop")
	sinks := exampleSinks(t, example)
	for _, c := range []struct {
		topic string
		r     stream.Record
		want  string
	}{
		{"events", stream.Record{Topic: "events", Value: []byte(`{"id":1,"type":"click"}`)}, "public.events_click"},
		{"orders", stream.Record{Topic: "orders", Value: []byte(`{"total":1}`), Headers: []stream.Header{{Key: "tenant", Value: []byte("acme")}}}, "public.acme_orders"},
	} {
		s := sinks[c.topic]
		if s.Router == nil {
			t.Errorf("MAPPING.md example: the sink of %s is not routed", c.topic)
			continue
		}
		rt, err := s.Router.Route(&c.r)
		if got := rt.Schema + "." + rt.Table; err != nil || got != c.want {
			t.Errorf("MAPPING.md example: a record of %s routes to %s (%v), want %s", c.topic, got, err, c.want)
		}
	}

	typo := strings.Replace(example, "events_${value.type}", "events_${valu.type}", 1)
	if typo == example {
		t.Fatal("the example has no events template to break")
	}
	want := `table template "events_${valu.type}": ${valu.type} is not ${topic}, ${topic.N}, ${value.FIELD} or ${header.KEY}`
	code, stderr := runWithConfig(t, typo, "--metrics-addr=")
	if code != exitUsage || !strings.Contains(stderr, want) || !strings.Contains(stderr, "table") {
		t.Errorf("run with a typo in a template: exit %d, stderr:\n%s\nwant exit %d and %q", code, stderr, exitUsage, want)
	}
	t.Setenv("KAFKA2PG_PG_URL", "")
	var stdout, errb bytes.Buffer
	code = dispatch(context.Background(), []string{"check", "--config", writeConfig(t, typo)}, &stdout, &errb)
	if code != exitUsage || !strings.Contains(errb.String(), want) {
		t.Errorf("check with a typo in a template: exit %d, stderr:\n%s\nwant exit %d and %q", code, errb.String(), exitUsage, want)
	}
}
