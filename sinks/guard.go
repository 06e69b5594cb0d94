package sinks

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kafka2pg/kafka2pg/cdc"
	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/schema"
)

// Soft deletes (delete, deleted_at, deleted_flag) and the version guard
// (version) of upsert and debezium sinks: see ingest.Sink's Deleted and
// Version.

// defaultDeletedAt is the column of delete soft without deleted_at or
// deleted_flag.
const defaultDeletedAt = "deleted_at"

// deletedOf reads sc's delete, deleted_at and deleted_flag: nil for hard
// deletes.
func deletedOf(sc Sink) (*ingest.Deleted, error) {
	switch sc.Delete {
	case "", "hard":
		switch {
		case sc.DeletedAt != "":
			return nil, keyErr("deleted_at", errors.New("deleted_at names the column of delete: soft: set delete: soft, or remove deleted_at"))
		case sc.DeletedFlag != "":
			return nil, keyErr("deleted_flag", errors.New("deleted_flag names the column of delete: soft: set delete: soft, or remove deleted_flag"))
		}
		return nil, nil
	case "soft":
	default:
		return nil, keyErr("delete", fmt.Errorf("delete %q is not hard or soft", sc.Delete))
	}
	if sc.DeletedAt != "" && sc.DeletedFlag != "" {
		return nil, keyErr("deleted_flag", errors.New("deleted_at (a timestamptz column) and deleted_flag (a boolean column) are two ways to mark a deleted row: keep one"))
	}
	d := &ingest.Deleted{Column: cmp.Or(sc.DeletedFlag, sc.DeletedAt, defaultDeletedAt), Flag: sc.DeletedFlag != ""}
	key := "deleted_at"
	if d.Flag {
		key = "deleted_flag"
	}
	if err := schema.ValidateIdent(key, d.Column); err != nil {
		return nil, keyErr(key, err)
	}
	if d.Column == sc.Version {
		return nil, keyErr(key, fmt.Errorf("column %q is also version: the mark of a deleted row and the version are two columns; name another (%s: is_deleted)", d.Column, key))
	}
	if hasColumn(sc.Columns, d.Column) || slices.Contains(sc.Key, d.Column) {
		return nil, keyErr(key, fmt.Errorf("column %q is in columns: the column of delete: soft is kafka2pg's to fill; name another (%s: is_deleted)", d.Column, key))
	}
	return d, nil
}

// guardedUpsert checks delete and version of a json upsert sink (mode
// upsert, or append when mode is not upsert), and returns sink with them:
// its table gains the deleted column, last.
func guardedUpsert(sc Sink, mode string, sink ingest.Sink) (ingest.Sink, error) {
	d, err := deletedOf(sc)
	if err != nil {
		return sink, err
	}
	if err := checkGuardMode(sc, mode, d); err != nil {
		return sink, err
	}
	if sc.Version != "" {
		i := slices.IndexFunc(sc.Columns, func(c Column) bool { return c.Name == sc.Version })
		if i < 0 {
			return sink, keyErr("version", fmt.Errorf("version %q is not in columns: name the column that holds each record's version (a sequence number, an updated_at)", sc.Version))
		}
		if err := versionColumn(sc, sc.Columns[i].Type); err != nil {
			return sink, err
		}
	}
	if m, ok := sink.Mapper.(*decode.JSONMapper); ok && d != nil {
		lm := ingest.NewLiveMapper(m, *d)
		sink.Mapper, sink.Table = lm, lm.Table()
	}
	sink.Deleted, sink.Version = d, sc.Version
	return sink, nil
}

// checkGuardMode refuses delete soft and version where they mean nothing
// (an append sink; soft deletes without deletes), and version with hard
// deletes.
func checkGuardMode(sc Sink, mode string, d *ingest.Deleted) error {
	switch {
	case mode != "upsert" && d != nil:
		return keyErr("delete", errors.New("delete: soft marks the rows an upsert sink's tombstones delete: set mode: upsert with delete_on_tombstone, or remove delete"))
	case mode != "upsert" && sc.Version != "":
		return keyErr("version", errors.New("version orders the changes of a key: set mode: upsert with key, or remove version"))
	case d != nil && !sc.DeleteOnTombstone:
		return keyErr("delete", errors.New("delete: soft marks the rows tombstones delete, and without delete_on_tombstone none does: set delete_on_tombstone: true, or remove delete"))
	case sc.Version != "" && sc.DeleteOnTombstone && d == nil:
		return keyErr("version", errors.New("version with hard deletes: a deleted key's row is gone with its version, so an older update would bring the key back; set delete: soft, whose rows keep it"))
	}
	return nil
}

// guardedConnect is the connect_json sink with sc's delete and version:
// the version is one of the typed columns, as the key is, since the
// table's other columns come with the records.
func guardedConnect(sc Sink, sink ingest.Sink, m *cdc.ConnectMapper) (ingest.Sink, error) {
	d, err := deletedOf(sc)
	if err != nil {
		return sink, err
	}
	if err := checkGuardMode(sc, cmp.Or(sc.Mode, "append"), d); err != nil {
		return sink, err
	}
	if sc.Version != "" {
		i := slices.IndexFunc(sc.Columns, func(c Column) bool { return c.Name == sc.Version })
		if i < 0 {
			return sink, keyErr("version", fmt.Errorf("version %q is not in columns: format connect_json creates the table before the first record, so type the version column in columns, as the key's", sc.Version))
		}
		if err := versionColumn(sc, m.Table().Columns[slices.Index(m.Table().ColumnNames(), sc.Version)].Type); err != nil {
			return sink, err
		}
	}
	if d != nil {
		lm := ingest.NewLiveMapper(m, *d)
		sink.Mapper, sink.Table = lm, lm.Table()
	}
	sink.Deleted, sink.Version = d, sc.Version
	return sink, nil
}

// debeziumGuard checks delete and version of a debezium sink: version
// needs delete soft, as every debezium sink deletes.
func debeziumGuard(sc Sink) (*ingest.Deleted, error) {
	d, err := deletedOf(sc)
	if err != nil {
		return nil, err
	}
	if sc.Version == "" {
		return d, nil
	}
	if d == nil {
		return nil, keyErr("version", errors.New("version with hard deletes: a deleted key's row is gone with its version, so an older change would bring the key back; set delete: soft, whose rows keep it"))
	}
	if err := schema.ValidateIdent("version", sc.Version); err != nil {
		return nil, keyErr("version", err)
	}
	if hasColumn(sc.Columns, sc.Version) || slices.Contains(sc.Key, sc.Version) {
		return nil, keyErr("version", fmt.Errorf("version %q is in columns: format debezium fills the version column from the event's source position; name a column of its own (version: src_version)", sc.Version))
	}
	return d, nil
}

// guardedRegistry is the upsert sink of a registry format with sc's
// version, checked against the columns the subject's schemas give, and
// deleted's column.
func guardedRegistry(sc Sink, sink ingest.Sink, m *decode.RegistryMapper, deleted *ingest.Deleted) (ingest.Sink, error) {
	t := m.Table()
	if sc.Version != "" {
		i := slices.IndexFunc(t.Columns, func(c schema.Column) bool { return c.Name == sc.Version })
		if i < 0 {
			return sink, keyErr("version", fmt.Errorf("version %q is not a column of the subject's schema: name the field that holds each record's version (columns %s)", sc.Version, strings.Join(t.ColumnNames(), ", ")))
		}
		if err := versionColumn(sc, t.Columns[i].Type); err != nil {
			return sink, err
		}
	}
	if deleted != nil {
		if slices.Contains(t.ColumnNames(), deleted.Column) {
			return sink, keyErr("delete", fmt.Errorf("column %q of delete: soft is a column of the subject's schema: name another with deleted_at or deleted_flag", deleted.Column))
		}
		lm := ingest.NewLiveMapper(m, *deleted)
		sink.Mapper, sink.Table = lm, lm.Table()
	}
	sink.Deleted, sink.Version = deleted, sc.Version
	return sink, nil
}

// versionColumn checks the type of sc's version column.
func versionColumn(sc Sink, typ string) error {
	if ct, err := schema.ParseType(typ); err == nil && (ct.Array || !ingest.VersionType(ct.Base.OID)) {
		return keyErr("version", fmt.Errorf("version %q is of type %s: a version is an integer, numeric, timestamp or date, which order as numbers and times", sc.Version, typ))
	}
	if slices.Contains(sc.Key, sc.Version) {
		return keyErr("version", fmt.Errorf("version %q is a key column: each version would be its own row; name a column outside the key", sc.Version))
	}
	return nil
}

// guardKeys reports whether sc sets any of the keys of soft deletes and
// the version guard.
func guardKeys(sc Sink) bool {
	return sc.Delete != "" || sc.DeletedAt != "" || sc.DeletedFlag != "" || sc.Version != ""
}
