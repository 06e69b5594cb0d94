package ingest

import (
	"reflect"
	"testing"
)

// A zero Config is DefaultConfig, field by field: the defaults are written
// once, and the flags that show DefaultConfig show what a library user
// gets. A negative TableWriters and MaxRecordBytes stay off.
func TestAZeroConfigRunsWithTheDefaultConfig(t *testing.T) {
	got, want := Config{}.withDefaults(), DefaultConfig()
	gv, wv := reflect.ValueOf(got), reflect.ValueOf(want)
	for i := range gv.NumField() {
		f := gv.Type().Field(i)
		if !f.IsExported() || f.Type.Kind() == reflect.Func || f.Type.Kind() == reflect.Interface || f.Type.Kind() == reflect.Pointer {
			continue
		}
		if !reflect.DeepEqual(gv.Field(i).Interface(), wv.Field(i).Interface()) {
			t.Errorf("Config{}.%s runs as %v, but DefaultConfig says %v", f.Name, gv.Field(i).Interface(), wv.Field(i).Interface())
		}
	}
	if got.TableWriters <= 0 || got.MaxRecordBytes <= 0 {
		t.Errorf("a zero Config runs with TableWriters %d and MaxRecordBytes %d, want the defaults' cross-partition batches and limit", got.TableWriters, got.MaxRecordBytes)
	}
	off := Config{TableWriters: -1, MaxRecordBytes: -1}.withDefaults()
	if off.TableWriters >= 0 || off.MaxRecordBytes >= 0 {
		t.Errorf("negative TableWriters and MaxRecordBytes run as %d and %d: they turn them off", off.TableWriters, off.MaxRecordBytes)
	}
}
