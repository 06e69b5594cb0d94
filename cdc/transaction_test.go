package cdc

import "testing"

func TestTransactionKeyIsPostgresTxIDAndOtherIDsWhole(t *testing.T) {
	for id, want := range map[string]string{
		"2287:31779392": "2287", // Postgres: txId and the event's LSN
		"2287:31779752": "2287", // its END: the commit's LSN
		"3E11FA47-71CA-11E1-9E33-C80AA9429562:23": "3E11FA47-71CA-11E1-9E33-C80AA9429562:23", // a MySQL GTID
		"mysql-bin.000003:154":                    "mysql-bin.000003:154",
		"00000025:00000d08:0025":                  "00000025:00000d08:0025", // SQL Server
		"571":                                     "571",
		":5":                                      ":5",
	} {
		if got := transactionKey(id); got != want {
			t.Errorf("transactionKey(%q) = %q, want %q", id, got, want)
		}
	}
}
