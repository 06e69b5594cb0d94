package enum

import "testing"

func TestNamesReadAndWriteEveryValue(t *testing.T) {
	n := Names{"stop", "skip", "dead-letter"}
	for i, name := range n {
		if got := n.Name(i, "OnError"); got != name {
			t.Errorf("Name(%d) = %q, want %q", i, got, name)
		}
		if v, err := n.Parse(name); err != nil || v != i {
			t.Errorf("Parse(%q) = %d, %v; want %d", name, v, err, i)
		}
	}
	if got := n.Name(7, "OnError"); got != "OnError(7)" {
		t.Errorf("Name(7) = %q, want OnError(7)", got)
	}
	if _, err := n.Parse("Stop"); err == nil || err.Error() != `"Stop" is not stop, skip or dead-letter` {
		t.Errorf("Parse(Stop) = %v, want an error listing the names", err)
	}
	if n.Valid(-1) || n.Valid(3) || !n.Valid(2) {
		t.Error("Valid is wrong at the edges")
	}
}
