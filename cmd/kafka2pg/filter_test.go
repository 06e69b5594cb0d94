package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// The example of docs/MAPPING.md's filters loads, and each of its sinks
// gets its filter; the same config with a typo in an expression exits 2
// naming the sink's key, the line and the position in the expression.
func TestTheFiltersExampleAndATypoInIt(t *testing.T) {
	example := mappingExample(t, "## Filters")
	t.Setenv("DATABASE_URL", "postgres://app@127.0.0.1:1/shop")
	sinks := exampleSinks(t, example)
	for _, topic := range []string{"events", "accounts", "shop.public.products"} {
		if sinks[topic].Filter == nil {
			t.Errorf("MAPPING.md example: the sink of %s has no filter", topic)
		}
	}

	typo := strings.Replace(example, `!= "closed"`, `!=! "closed"`, 1)
	if typo == example {
		t.Fatal("the example has no accounts filter to break")
	}
	code, stderr := runWithConfig(t, typo, "--metrics-addr=")
	want := "sink of topic \"accounts\" at line 11: where at line 15: expression `(value.status ?? \"active\") !=! \"closed\"` at line 1, column 30"
	if code != exitUsage || !strings.Contains(stderr, want) {
		t.Errorf("a typo in a where: exit %d, stderr:\n%s\nwant exit %d and %q", code, stderr, exitUsage, want)
	}
}

// check refuses the typo as run does, before it reads anything.
func TestCheckRefusesATypoInAWhere(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://app@127.0.0.1:1/shop")
	t.Setenv("KAFKA2PG_PG_URL", "")
	typo := strings.Replace(mappingExample(t, "## Filters"), `value.type == "order"`, `value.type = "order"`, 1)
	var stdout, stderr bytes.Buffer
	code := dispatch(context.Background(), []string{"check", "--config", writeConfig(t, typo)}, &stdout, &stderr)
	want := "sink of topic \"events\" at line 5: where at line 7: expression `value.type = \"order\" && headers.tenant == \"acme\"` at line 1, column 12"
	if code != exitUsage || !strings.Contains(stderr.String(), want) {
		t.Errorf("check: exit %d, stderr:\n%s\nwant exit %d and %q", code, stderr.String(), exitUsage, want)
	}
}
