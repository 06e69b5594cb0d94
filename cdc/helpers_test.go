package cdc

import (
	"math/big"

	"github.com/kafka2pg/kafka2pg/stream"
)

func bigInt(x int64) *big.Int { return big.NewInt(x) }

// event is a decoded change and what its envelope said besides, which the
// source columns take and the tests check.
type event struct {
	stream.Change
	Event       byte
	Source      sourceBlock
	Transaction transactionBlock
	TsMs        int64
}

// decodeEvent is Decode into ev.
func decodeEvent(d *Decoder, rec *stream.Record, ev *event) error {
	var env envelope
	err := d.decodeEnvelope(rec, nil, &ev.Change, &env)
	ev.Event, ev.Source, ev.Transaction, ev.TsMs = env.op, env.source, env.transaction, env.tsMs
	return err
}
