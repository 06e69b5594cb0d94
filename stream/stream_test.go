package stream_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kafka2pg/kafka2pg/stream"
)

// A writer's caller branches on the two errors through wrapping, as a
// write's error reaches it wrapped by the layers between.
func TestTheWriteErrorsAreFoundThroughWrapping(t *testing.T) {
	fenced := fmt.Errorf("write batch: %w", &stream.FencedError{Topic: "orders", Partition: 3, Epoch: 4, FirstOffset: 100, StoredEpoch: 5, StoredOffset: 90})
	if !errors.Is(fenced, stream.ErrFenced) {
		t.Errorf("errors.Is(%v, ErrFenced) = false", fenced)
	}
	var fe *stream.FencedError
	if !errors.As(fenced, &fe) || fe.StoredEpoch != 5 {
		t.Errorf("errors.As(%v, *FencedError) = %+v, want the stored epoch 5", fenced, fe)
	}

	cause := errors.New("value is not JSON")
	stop := fmt.Errorf("write batch: %w", &stream.StopError{Topic: "orders", Partition: 3, Offset: 7, Kind: "invalid_json", Err: cause})
	var se *stream.StopError
	if !errors.As(stop, &se) || se.Offset != 7 {
		t.Fatalf("errors.As(%v, *StopError) = %+v, want offset 7", stop, se)
	}
	if !errors.Is(stop, cause) || errors.Is(stop, stream.ErrFenced) {
		t.Errorf("a StopError must unwrap to its cause and not be fenced: %v", stop)
	}
	for _, want := range []string{"orders/3", "offset 7", "invalid_json", "value is not JSON", "ingest.Config.OnError=dead-letter"} {
		if !strings.Contains(se.Error(), want) {
			t.Errorf("StopError says %q; want it to name %q (the record, the reason and the fix)", se.Error(), want)
		}
	}
}

// The caller of a write (the reader's partition goroutine) tells the three
// outcomes apart like this.
func ExampleStopError() {
	outcome := func(err error) string {
		var stop *stream.StopError
		switch {
		case err == nil:
			return "durable: mark the batch's next offset"
		case errors.Is(err, stream.ErrFenced):
			return "fenced: drop local state and claim again"
		case errors.As(err, &stop):
			return fmt.Sprintf("stopped: durable up to offset %d, the bad record", stop.Offset)
		default:
			return "unknown: claim again to re-read the durable position"
		}
	}
	fmt.Println(outcome(nil))
	fmt.Println(outcome(&stream.FencedError{Topic: "orders", StoredEpoch: 2}))
	fmt.Println(outcome(&stream.StopError{Topic: "orders", Offset: 41, Kind: "invalid_json", Err: errors.New("bad")}))
	fmt.Println(outcome(errors.New("connection reset")))
	// Output:
	// durable: mark the batch's next offset
	// fenced: drop local state and claim again
	// stopped: durable up to offset 41, the bad record
	// unknown: claim again to re-read the durable position
}
