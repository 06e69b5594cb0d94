package main

import (
	"strings"
	"testing"
)

// The example of docs/MAPPING.md's children loads, and its sinks get
// their child tables; the same config without the append sink's
// coordinates exits 2 naming the sink's key and the fix.
func TestTheChildrenExampleAndAnAppendSinkWithoutCoordinates(t *testing.T) {
	example := mappingExample(t, "## Children")
	t.Setenv("DATABASE_URL", "postgres://app@127.0.0.1:1/shop")
	sinks := exampleSinks(t, example)
	var got []string
	for _, topic := range []string{"orders", "clicks"} {
		for _, c := range sinks[topic].Children {
			got = append(got, topic+">"+c.Table.Name+"("+strings.Join(c.Table.ColumnNames(), ",")+")")
		}
	}
	want := "orders>order_items(id,item_index,sku,qty,price) orders>order_tags(id,index,tag) " +
		"clicks>click_events(kafka_topic,kafka_partition,kafka_offset,index,url,at)"
	if strings.Join(got, " ") != want {
		t.Errorf("MAPPING.md example's children:\n got %s\nwant %s", strings.Join(got, " "), want)
	}

	broken := strings.Replace(example, "    metadata: {topic: kafka_topic, partition: kafka_partition, offset: kafka_offset}\n", "", 1)
	if broken == example {
		t.Fatal("the example has no metadata line to remove")
	}
	code, stderr := runWithConfig(t, broken, "--metrics-addr=")
	if code != exitUsage || !strings.Contains(stderr, `sink of topic "clicks"`) || !strings.Contains(stderr, "children") ||
		!strings.Contains(stderr, "metadata: {topic: kafka_topic") {
		t.Errorf("children of an append sink without coordinates: exit %d, stderr:\n%s\nwant exit %d naming the sink, children and the fix", code, stderr, exitUsage)
	}
}
