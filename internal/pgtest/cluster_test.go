package pgtest

import (
	"maps"
	"testing"
)

func TestParseEnvFile(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		want    map[string]string
		wantErr bool
	}{
		{
			name: "single-quoted values as pg-up.sh writes them are read back",
			text: "# comment\nPGDATA='/tmp/x/data'\n\nPGPORT='5432'\n",
			want: map[string]string{"PGDATA": "/tmp/x/data", "PGPORT": "5432"},
		},
		{
			name: "a quote written as '\\'' is read back as a quote",
			text: `PGDATA='/home/o'\''brien/data'`,
			want: map[string]string{"PGDATA": "/home/o'brien/data"},
		},
		{
			name: "spaces inside quotes are kept",
			text: "PGLOG='/a b/postgres.log'",
			want: map[string]string{"PGLOG": "/a b/postgres.log"},
		},
		{
			name: "an unquoted plain value is read as it is",
			text: "PGPORT=5432",
			want: map[string]string{"PGPORT": "5432"},
		},
		{
			name: "an empty value is empty",
			text: "PGLOG=",
			want: map[string]string{"PGLOG": ""},
		},
		{name: "an unterminated quote is an error", text: "PGDATA='/tmp", wantErr: true},
		{name: "a line without = is an error", text: "PGDATA", wantErr: true},
		{name: "a variable expansion is an error, not expanded", text: "PGDATA=$HOME/data", wantErr: true},
		{name: "double quotes are an error", text: `PGDATA="/tmp"`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseEnvFile(tt.text)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("parseEnvFile(%q) = %v, nil; want an error", tt.text, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseEnvFile(%q): %v", tt.text, err)
			}
			if !maps.Equal(got, tt.want) {
				t.Errorf("parseEnvFile(%q) = %v; want %v", tt.text, got, tt.want)
			}
		})
	}
}

func TestRecordedClusterRefusesAServerPgUpDidNotStart(t *testing.T) {
	c, err := recordedCluster("postgres://postgres@192.0.2.1:1/postgres")
	if err == nil {
		t.Fatalf("recordedCluster accepted a URL of another server and gave %+v", c)
	}
}
