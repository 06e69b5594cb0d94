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

// Every value of the closed sets reads back from its name, and a name
// that is not one is refused naming the choices.
func TestTheClosedSetsReadAndWriteTheirNames(t *testing.T) {
	for _, name := range isolationNames {
		var v IsolationLevel
		if err := v.UnmarshalText([]byte(name)); err != nil || v.String() != name {
			t.Errorf("IsolationLevel %q reads as %v, %v", name, v, err)
		}
	}
	for _, name := range groupProtocolNames {
		if v, err := ParseGroupProtocol(name); err != nil || v.String() != name {
			t.Errorf("GroupProtocol %q reads as %v, %v", name, v, err)
		}
	}
	for _, name := range onDataLossNames {
		if v, err := ParseOnDataLoss(name); err != nil || v.String() != name {
			t.Errorf("OnDataLoss %q reads as %v, %v", name, v, err)
		}
	}
	for _, name := range balancerNames {
		if v, err := ParseBalancer(name); err != nil || v.String() != name {
			t.Errorf("Balancer %q reads as %v, %v", name, v, err)
		}
	}
	if _, err := ParseIsolationLevel("read-committed"); err == nil || err.Error() != `"read-committed" is not read_committed or read_uncommitted` {
		t.Errorf("a wrong isolation level: %v, want the choices named", err)
	}
	var p StartPolicy
	for _, s := range []string{"earliest", "latest", "committed", "2026-11-30T09:00:00Z"} {
		if err := p.UnmarshalText([]byte(s)); err != nil || p.String() != s {
			t.Errorf("StartPolicy %q reads as %v, %v", s, p, err)
		}
	}
}
