package reader

import (
	"reflect"
	"testing"
)

// A zero Config is DefaultConfig, field by field: the defaults are written
// once, and the flags that show DefaultConfig show what a library user
// gets.
func TestAZeroConfigRunsWithTheDefaultConfig(t *testing.T) {
	got, want := Config{}.withDefaults(), DefaultConfig()
	derived := map[string]bool{"FetchMaxBytes": true, "FetchMaxPartitionBytes": true, "QueueCapacity": true, "Permanent": true, "Logger": true}
	gv, wv := reflect.ValueOf(got), reflect.ValueOf(want)
	for i := range gv.NumField() {
		f := gv.Type().Field(i)
		if !f.IsExported() || derived[f.Name] {
			continue
		}
		if !reflect.DeepEqual(gv.Field(i).Interface(), wv.Field(i).Interface()) {
			t.Errorf("Config{}.%s runs as %v, but DefaultConfig says %v", f.Name, gv.Field(i).Interface(), wv.Field(i).Interface())
		}
	}
	if got.BatchLinger <= 0 {
		t.Errorf("a zero BatchLinger runs as %v: the default spaces the batches at the end", got.BatchLinger)
	}
	if off := (Config{BatchLinger: -1}).withDefaults(); off.BatchLinger >= 0 {
		t.Errorf("a negative BatchLinger runs as %v: it turns the linger off", off.BatchLinger)
	}
}
