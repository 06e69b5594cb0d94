package schema_test

import (
	"strings"
	"testing"

	"github.com/kafka2pg/kafka2pg/schema"
)

func TestTableNameForTopic(t *testing.T) {
	cases := []struct{ topic, want string }{
		{"orders", "orders"},
		{"Orders.EU-West", "orders_eu_west"},
		{"2026-events", "t_2026_events"},
		{"", "t_"},
		{"ünïcode", "_n_code"},
		{strings.Repeat("a", 100), strings.Repeat("a", 63)},
	}
	for _, c := range cases {
		if got := schema.TableNameForTopic(c.topic); got != c.want {
			t.Errorf("TableNameForTopic(%q) = %q, want %q", c.topic, got, c.want)
		}
	}
}

func TestValidateIdentRefusesNamesPostgresWouldMangle(t *testing.T) {
	for _, name := range []string{"", strings.Repeat("x", 64), "a\x00b"} {
		err := schema.ValidateIdent("--table", name)
		if err == nil || !strings.Contains(err.Error(), "--table") {
			t.Errorf("ValidateIdent(%q) = %v, want an error naming --table", name, err)
		}
	}
	if err := schema.ValidateIdent("--table", "Weird Name; with spaces"); err != nil {
		t.Errorf("a quotable name was refused: %v", err)
	}
}
