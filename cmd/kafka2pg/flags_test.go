package main

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/kafka2pg/kafka2pg/bridge"
	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/reader"
)

// Run's flags, given nothing, set the bridge's configuration to the
// library's defaults, and 0 on a flag whose 0 is "off" gives the library's
// off: the bench, the tests and an embedding program run the product the
// command runs.
func TestRunFlagsDefaultToTheLibrarysConfig(t *testing.T) {
	t.Setenv("KAFKA2PG_PG_URL", "")
	t.Setenv("DATABASE_URL", "")
	_, o := parseRunForTest(t)
	got, want := o.cfg, bridge.DefaultConfig()
	// What no flag sets stays as the library has it unset.
	want.Writer.CombineMaxRows = 0
	compare := func(what string, g, w reflect.Value) {
		for i := range g.NumField() {
			f := g.Type().Field(i)
			if !f.IsExported() || f.Type.Kind() == reflect.Func || f.Type.Kind() == reflect.Interface || f.Type.Kind() == reflect.Pointer {
				continue
			}
			if !reflect.DeepEqual(g.Field(i).Interface(), w.Field(i).Interface()) {
				t.Errorf("%s.%s: the flag gives %v, the library's default is %v", what, f.Name, g.Field(i).Interface(), w.Field(i).Interface())
			}
		}
	}
	compare("Kafka", reflect.ValueOf(got.Kafka), reflect.ValueOf(want.Kafka))
	compare("Writer", reflect.ValueOf(got.Writer), reflect.ValueOf(want.Writer))
	got.Kafka, got.Writer = want.Kafka, want.Writer // compared above
	compare("bridge.Config", reflect.ValueOf(got), reflect.ValueOf(want))

	_, o = parseRunForTest(t, "--batch-linger", "0", "--table-writers", "0", "--max-record-bytes", "0", "--caught-up-timeout", "0",
		"--ready-stall-timeout", "0", "--progress-interval", "0")
	c := o.cfg
	for name, v := range map[string]int64{"BatchLinger": int64(c.Kafka.BatchLinger), "TableWriters": int64(c.Writer.TableWriters),
		"MaxRecordBytes": int64(c.Writer.MaxRecordBytes), "CaughtUpTimeout": int64(c.CaughtUpTimeout),
		"ReadyStallTimeout": int64(c.ReadyStallTimeout), "ProgressInterval": int64(c.ProgressInterval)} {
		if v >= 0 {
			t.Errorf("%s is %d for a flag of 0: want the library's off, a negative value", name, v)
		}
	}
	if fs, _ := parseRunForTest(t, "--batch-linger", "0"); fs.Lookup("batch-linger").Value.String() != "0" {
		t.Errorf("--batch-linger 0 reads back as %q, want 0", fs.Lookup("batch-linger").Value.String())
	}
}

// The flags of the closed sets set their typed fields from their names, and
// a name that is not one of them is refused naming the flag and the
// choices.
func TestClosedSetFlagsTakeTheirNames(t *testing.T) {
	t.Setenv("KAFKA2PG_PG_URL", "")
	t.Setenv("DATABASE_URL", "")
	_, o := parseRunForTest(t, "--kafka-isolation-level", "read_uncommitted", "--kafka-group-protocol", "consumer",
		"--on-data-loss", "skip", "--on-error", "skip", "--kafka-balancers", "sticky,range", "--kafka-balancers", "round-robin",
		"--kafka-start", "latest", "--value-format", "text")
	c := o.cfg
	if c.Kafka.IsolationLevel != reader.ReadUncommitted || c.Kafka.GroupProtocol != reader.GroupProtocolConsumer ||
		c.Kafka.OnDataLoss != reader.OnDataLossSkip || c.Writer.OnError != ingest.OnErrorSkip ||
		!slices.Equal(c.Kafka.Balancers, []reader.Balancer{reader.Sticky, reader.Range, reader.RoundRobin}) ||
		c.Kafka.Start.Kind != reader.StartLatest || o.valueFormat != decode.ValueText {
		t.Errorf("parsed %+v, value format %v", c, o.valueFormat)
	}
	for flag, want := range map[string]string{
		"kafka-isolation-level": "read_committed or read_uncommitted", "kafka-group-protocol": "classic or consumer",
		"on-data-loss": "stop or skip", "on-error": "dead-letter, stop or skip",
		"kafka-balancers": "cooperative-sticky, sticky, range or round-robin", "kafka-start": "earliest, latest, committed",
	} {
		fs := newFlagSet("run")
		defineRunFlags(fs, &runOptions{})
		err := fs.Parse([]string{"--" + flag, "nope"})
		if err == nil || !strings.Contains(err.Error(), "--"+flag) || !strings.Contains(err.Error(), want) {
			t.Errorf("--%s nope: %v, want an error naming the flag and %q", flag, err, want)
		}
	}
}
