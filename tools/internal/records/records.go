// Package records holds what the benches' synthetic records share: the
// value lists their fields cycle through, and appenders that write JSON
// by hand. A bench's producer shares the machine's cores with the bridge
// and Postgres, so its records are built without fmt.
//
// No goroutines, no I/O; it imports only the standard library.
package records

import "strconv"

// The values an event's fields cycle through, by record number.
var (
	Events     = []string{"page_view", "add_to_cart", "checkout_started", "checkout_completed", "refund_requested"}
	Currencies = []string{"EUR", "USD", "GBP", "CHF"}
	Countries  = []string{"DE", "FR", "US", "GB", "NL", "CH", "ES", "IT"}
	Devices    = []string{"mobile", "desktop", "tablet"}
)

// AppendEventFields appends the fields every bench record has, in this
// order, each after a comma: user_id ("u" and i%100,000 in 6 digits),
// event, amount (i%100,000 and 2 decimals), currency and country.
func AppendEventFields(b []byte, i int) []byte {
	b = append(b, `,"user_id":"u`...)
	b = AppendPadded(b, i%100_000, 6)
	b = AppendString(b, `","event":`, Events[i%len(Events)])
	b = append(b, `,"amount":`...)
	b = strconv.AppendInt(b, int64(i%100_000), 10)
	b = append(b, '.')
	b = AppendPadded(b, i%100, 2)
	b = AppendString(b, `,"currency":`, Currencies[i%len(Currencies)])
	return AppendString(b, `,"country":`, Countries[i%len(Countries)])
}

// AppendString appends prefix and s as a JSON string; the benches'
// strings need no escape.
func AppendString(b []byte, prefix, s string) []byte {
	b = append(b, prefix...)
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// AppendPadded appends v (≥ 0) in decimal, zero-padded to width digits,
// as fmt's %0*d does.
func AppendPadded(b []byte, v, width int) []byte {
	var digits [20]byte
	d := strconv.AppendInt(digits[:0], int64(v), 10)
	for range width - len(d) {
		b = append(b, '0')
	}
	return append(b, d...)
}
