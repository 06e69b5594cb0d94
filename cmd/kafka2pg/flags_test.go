package main

import (
	"reflect"
	"testing"

	"github.com/kafka2pg/kafka2pg/bridge"
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
