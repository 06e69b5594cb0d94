package cdc

import (
	"encoding/json"
	"math/big"
	"strconv"
	"strings"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/pgvalue"
	"github.com/kafka2pg/kafka2pg/stream"
)

// The version of a change (Config.Version): a number that grows with the
// source's position, so that of two changes of one row the later one has
// the greater version.
//
//   - Postgres: source.sequence, the JSON string ["<last commit LSN>",
//     "<LSN>"], as the number last commit LSN × 2^64 + LSN. The connector
//     streams transactions in commit order, the last commit LSN grows from
//     one transaction to the next and the LSN within one. source.lsn alone
//     does not grow with the stream: a transaction that commits later may
//     have written its change at an LSN before one of a transaction
//     committed earlier. A connector too old to send sequence: source.lsn.
//   - MySQL: the binlog position, as the number file's sequence number ×
//     2^64 + pos × 2^20 + row. The file names of one server grow
//     (mysql-bin.000042); after a failover to another server they are that
//     server's, so a sink whose source fails over needs a version column
//     of its own.
//   - Snapshot reads (op r): 0, below every streamed change, so a read
//     that arrives after a change of its row loses to it.
//
// Other connectors send no position kafka2pg can order: their changes are
// bad records.

// positionVersion is env's version; ok false when the source block has
// no position to order by.
func positionVersion(env *envelope) (v any, ok bool) {
	if env.op == 'r' {
		return pgvalue.Numeric{Int: new(big.Int), Exp: 0}, true
	}
	s := &env.source
	switch {
	case s.Sequence != "":
		var pair [2]*string
		if json.Unmarshal([]byte(s.Sequence), &pair) != nil || pair[1] == nil {
			break
		}
		var commit, lsn uint64
		var err error
		if pair[0] != nil {
			if commit, err = strconv.ParseUint(*pair[0], 10, 64); err != nil {
				break
			}
		}
		if lsn, err = strconv.ParseUint(*pair[1], 10, 64); err != nil {
			break
		}
		return positionNumber(commit, 64, lsn), true
	case s.LSN > 0:
		return positionNumber(0, 0, uint64(s.LSN)), true
	case s.File != "" && s.Pos >= 0:
		i := strings.LastIndexByte(s.File, '.')
		seq, err := strconv.ParseUint(s.File[i+1:], 10, 64)
		if err != nil || s.Row < 0 || s.Row >= 1<<20 {
			break
		}
		return positionNumber(seq, 64, uint64(s.Pos)<<20|uint64(s.Row)), true
	}
	return nil, false
}

// positionNumber is hi × 2^shift + lo, as a numeric.
func positionNumber(hi uint64, shift uint, lo uint64) pgvalue.Numeric {
	n := new(big.Int).SetUint64(hi)
	n.Lsh(n, shift)
	n.Add(n, new(big.Int).SetUint64(lo))
	return pgvalue.Numeric{Int: n, Exp: 0}
}

// changeVersion sets ch.Version from env, when the decoder has a version
// column: a change without a position is a bad record.
func (d *Decoder) changeVersion(rec *stream.Record, env *envelope, ch *stream.Change) error {
	if d.t.cfg.Version == "" {
		return nil
	}
	v, ok := positionVersion(env)
	if !ok {
		return bad(rec, "", decode.KindInvalidValue, "the event's source block has no position to order it by (Postgres' sequence or lsn, MySQL's file and pos), which the version column %q takes: remove version from the sink, whose changes then apply in offset order", d.t.cfg.Version)
	}
	ch.Version = v
	return nil
}
