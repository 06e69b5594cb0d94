package ingest

import (
	"context"
	"errors"
	"unicode/utf8"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The database's encoding, as it bears on what the writer stores. kafka2pg
// talks to Postgres in UTF-8 (cmd/kafka2pg sets client_encoding), and
// Postgres converts text to the database's encoding: on one that is not
// UTF-8 (LATIN1, say) a character it lacks fails with SQLSTATE 22P05.
// Holds asks that question of a name before anything keys rows or tables
// by it; package deadletters writes a letter's text in ASCII there.

// holdsUTF8 says the connection's database stores any UTF-8 text: its
// encoding is UTF8, or SQL_ASCII, which stores bytes as they come.
func holdsUTF8(c *pgconn.PgConn) bool {
	switch c.ParameterStatus("server_encoding") {
	case "UTF8", "SQL_ASCII":
		return true
	}
	return false
}

// Holds reports whether the connection's database can store s as text:
// at once where it holds any UTF-8 (holdsUTF8) or s is ASCII, which every
// server encoding of Postgres contains; otherwise Postgres is asked, and
// SQLSTATE 22P05 means it cannot. cmd/kafka2pg asks it of the names it
// will key rows or create tables by, before anything is written.
func Holds(ctx context.Context, c *pgx.Conn, s string) (bool, error) {
	if holdsUTF8(c.PgConn()) || isASCII(s) {
		return true, nil
	}
	_, err := c.Exec(ctx, "SELECT $1::text", s)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UntranslatableCharacter {
		return false, nil
	}
	return err == nil, err
}

// isASCII says s has no byte beyond ASCII.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
