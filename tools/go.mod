module github.com/kafka2pg/kafka2pg/tools

go 1.26.8

require (
	github.com/jackc/pgx/v5 v5.12.0
	github.com/kafka2pg/kafka2pg v0.0.0-00010101000000-000000000000
	github.com/twmb/franz-go v1.22.3
	github.com/twmb/franz-go/pkg/kadm v1.20.0
)

require (
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	github.com/twmb/franz-go/pkg/kmsg v1.15.1 // indirect
	golang.org/x/text v0.42.0 // indirect
)

replace github.com/kafka2pg/kafka2pg => ../
