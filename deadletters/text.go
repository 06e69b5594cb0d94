package deadletters

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/stream"
)

// A letter's text must fit the database's encoding. kafka2pg talks to
// Postgres in UTF-8, and Postgres converts text to the database's
// encoding: on one that is not UTF-8 (LATIN1, say) a character it lacks
// fails with SQLSTATE 22P05. A row's failure makes a dead letter; the
// letter must not fail the same way, so its text is written in ASCII
// there.

// text writes the text of letters for one connection's database: as it
// is where any UTF-8 fits, in ASCII elsewhere (the message with escapes,
// the headers with key_base64 and value_base64, which
// decode.ParseHeadersJSON reads back).
type text struct{ ascii bool }

// textFor is the text of letters on c: UTF8 and SQL_ASCII databases
// (SQL_ASCII stores bytes as they come) hold any UTF-8.
func textFor(c *pgconn.PgConn) text {
	switch c.ParameterStatus("server_encoding") {
	case "UTF8", "SQL_ASCII":
		return text{}
	}
	return text{ascii: true}
}

// message is the error_message of a letter whose error says msg.
func (t text) message(msg string) string {
	if t.ascii {
		return escapeNonASCII(msg)
	}
	return msg
}

// headers is the headers jsonb of a letter; nil without headers.
func (t text) headers(hs []stream.Header) any {
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
