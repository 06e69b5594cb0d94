package infer_test

import (
	"fmt"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/decode/infer"
)

func Example() {
	var inf infer.Inference
	for _, v := range []string{
		`{"id":1,"at":"2026-01-02T03:04:05Z","customer":{"name":"Ada"},"total":12.50}`,
		`{"id":2,"at":"2026-01-02T03:04:06Z","customer":{"name":"Alan"},"total":3}`,
		`not json`,
	} {
		inf.Observe([]byte(v))
	}
	for _, c := range inf.Columns(decode.NestedFlatten) {
		fmt.Println(c.Name, c.Path, c.Type, c.NotNull)
	}
	fmt.Println(inf.Docs, "objects,", inf.Skipped, "skipped")
	// Output:
	// id id bigint true
	// at at timestamptz true
	// customer_name customer.name text true
	// total total numeric(20,2) true
	// 2 objects, 1 skipped
}
