package testreport

import "time"

// FaultsEnv names the environment variable with the path of the JSON-lines
// file that fault cases append to. Unset, cases record nothing.
const FaultsEnv = "KAFKA2PG_FAULTS_REPORT"

// FaultResult is one fault case's outcome. The counts are measured by the
// case (SQL against the records it produced), never assumed.
type FaultResult struct {
	Case       string    `json:"case"`       // "1", "4b": the number in the fault matrix
	Name       string    `json:"name"`       // a short title
	Broker     string    `json:"broker"`     // "kfake", "Apache Kafka, 1 node", ...
	Injection  string    `json:"injection"`  // how the fault was injected
	Trials     int       `json:"trials"`     // how many times it was injected
	Produced   int64     `json:"produced"`   // records that Kafka holds and the bridge must store
	Rows       int64     `json:"rows"`       // rows found in the target table
	Lost       int64     `json:"lost"`       // produced records with no row
	Duplicate  int64     `json:"duplicated"` // rows beyond the first per produced record
	Unexpected int64     `json:"unexpected"` // rows of records that must not land (aborted, deleted, unknown)
	Result     string    `json:"result"`     // "PASS" or "FAIL"
	WallSecs   float64   `json:"wall_seconds"`
	Notes      string    `json:"notes,omitempty"`
	Finished   time.Time `json:"finished"`
}
