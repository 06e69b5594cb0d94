package livebridge

import (
	"testing"
)

func TestSumAddsTheMatchingSeries(t *testing.T) {
	body := `# HELP kafka2pg_reader_partition_lag_records Lag.
# TYPE kafka2pg_reader_partition_lag_records gauge
kafka2pg_reader_partition_lag_records{partition="0",topic="page views {x}"} 10
kafka2pg_reader_partition_lag_records{partition="1",topic="page views {x}"} 32.5
kafka2pg_reader_partition_lag_records_other 1000
kafka2pg_ingest_rows_total{table="\"public\".\"a\""} 7 1700000000000
kafka2pg_ingest_rows_total{table="\"public\".\"b\""} 5
`
	tests := []struct {
		name   string
		metric string
		labels []string
		want   float64
		wantOK bool
	}{
		{"every series of a gauge, label values with spaces and braces", "kafka2pg_reader_partition_lag_records", nil, 42.5, true},
		{"only the series whose labels match", "kafka2pg_reader_partition_lag_records", []string{`partition="1"`}, 32.5, true},
		{"a sample with a timestamp", "kafka2pg_ingest_rows_total", []string{`"a\"`}, 7, true},
		{"a name that is only a prefix of exported names", "kafka2pg_reader_partition", nil, 0, false},
		{"a label nobody has", "kafka2pg_ingest_rows_total", []string{`table="nope"`}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Sum(body, tt.metric, tt.labels...)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("Sum(%s, %q) = %v, %v; want %v, %v", tt.metric, tt.labels, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}
