package ingest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/stream"
)

// The database's encoding, as it bears on what the writer stores. kafka2pg
// talks to Postgres in UTF-8 (cmd/kafka2pg sets client_encoding), and
// Postgres converts text to the database's encoding: on one that is not
// UTF-8 (LATIN1, say) a character it lacks fails with SQLSTATE 22P05. A
// row's failure makes a dead letter; a dead letter must not fail the same
// way, so its text is written in ASCII there (letterText). Holds asks
// the same question of a name before anything keys rows or tables by it.

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

// letterText writes the text of dead letters for one connection's
// database: as it is where any UTF-8 fits, in ASCII elsewhere (the message
// with escapes, the headers with key_base64 and value_base64, which
// decode.ParseHeadersJSON reads back).
type letterText struct{ ascii bool }

func letterTextFor(c *pgconn.PgConn) letterText { return letterText{ascii: !holdsUTF8(c)} }

// message is the error_message of a dead letter whose error says msg.
func (t letterText) message(msg string) string {
	if t.ascii {
		return escapeNonASCII(msg)
	}
	return msg
}

// headers is the headers jsonb of a dead letter; nil without headers.
func (t letterText) headers(hs []stream.Header) any {
	switch {
	case len(hs) == 0:
		return nil
	case t.ascii:
		return decode.HeadersJSONASCII(hs)
	}
	return decode.HeadersJSON(hs)
}

// escapeNonASCII writes the characters of s beyond ASCII as \uXXXX (or
// \UXXXXXXXX), and bytes that are not UTF-8 as \xXX: text any database
// encoding holds.
func escapeNonASCII(s string) string {
	if isASCII(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < utf8.RuneSelf:
			b.WriteByte(byte(r))
		case r <= 0xFFFF:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			fmt.Fprintf(&b, `\U%08X`, r)
		}
		i += n
	}
	return b.String()
}
