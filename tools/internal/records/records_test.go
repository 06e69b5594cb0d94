package records

import (
	"encoding/json"
	"fmt"
	"testing"
)

func TestAppendPaddedIsPercentZeroD(t *testing.T) {
	for _, c := range []struct{ v, width int }{{0, 0}, {0, 1}, {7, 3}, {123, 3}, {1234, 3}, {99_999, 6}, {100_000, 6}, {1 << 40, 8}} {
		if got, want := string(AppendPadded([]byte("x"), c.v, c.width)), fmt.Sprintf("x%0*d", c.width, c.v); got != want {
			t.Errorf("AppendPadded(%d, %d) = %q, want %q", c.v, c.width, got, want)
		}
	}
}

func TestAppendStringIsAJSONString(t *testing.T) {
	b := AppendString([]byte("{"), `"event":`, Events[2])
	b = append(b, '}')
	var v map[string]string
	if err := json.Unmarshal(b, &v); err != nil || v["event"] != "checkout_started" {
		t.Fatalf("%s: %v, %v", b, v, err)
	}
}

func TestAppendEventFieldsIsTheFmtForm(t *testing.T) {
	for _, i := range []int{0, 1, 7, 99, 12_345, 99_999, 100_000, 1_234_567} {
		want := fmt.Sprintf(`,"user_id":"u%06d","event":%q,"amount":%d.%02d,"currency":%q,"country":%q`,
			i%100_000, Events[i%len(Events)], i%100_000, i%100, Currencies[i%len(Currencies)], Countries[i%len(Countries)])
		if got := string(AppendEventFields(nil, i)); got != want {
			t.Errorf("AppendEventFields(%d) = %s, want %s", i, got, want)
		}
	}
}
