package sinks

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/schema"
	"github.com/kafka2pg/kafka2pg/stream"
)

// Routing by content: a sink's table and schema templates may also read
// the record, so that one topic fills many tables:
//
//	${value.PATH}  a field of the JSON value (a column's path syntax:
//	               ${value.type}, ${value.customer.region})
//	${header.KEY}  the record's header KEY (its last value)
//
// The sink is then routed (ingest.Sink.Router): each record's table is
// named as it comes, and created and evolved on its first record. A
// field or header gives a name part when it is a string or a number
// (its JSON text) that is not empty and has only letters, digits, '_',
// '-' and '.': quotes, spaces, slashes and control characters are
// refused, so that a routed name is one an operator can type. A record
// whose name cannot be made (the field is missing or null, an object, a
// refused character, a name over 63 bytes) is a bad record of kind
// route, never a stop. ${value...} reads format json's values only;
// ${header...} any format whose table is fixed (json, text, bytes).

// contentRouter is the ingest.Router of a sink whose templates read the
// record; one serves every topic of a topic_regex sink, so that the
// writer's table limit counts the sink's tables.
type contentRouter struct {
	table, schema nameTemplate
	fixedSchema   string // the schema when it is no template
	re            *regexp.Regexp
}

// newContentRouter is the router of sc, nil when neither template reads
// the record. defaultSchema is Config.Schema's.
func newContentRouter(sc Sink, defaultSchema string) (*contentRouter, error) {
	var (
		re  *regexp.Regexp
		err error
	)
	groups := groupNames(sc.TopicRegex)
	if sc.TopicRegex != "" {
		if re, err = sinkRegex(sc.TopicRegex); err != nil {
			return nil, keyErr("topic_regex", err)
		}
	}
	c := &contentRouter{re: re, fixedSchema: defaultSchema}
	if c.table, err = parseNameTemplate(cmp.Or(sc.Table, "${topic}"), groups); err != nil {
		return nil, keyErr("table", fmt.Errorf("table template %w", err))
	}
	if sc.Schema != "" {
		if c.schema, err = parseNameTemplate(sc.Schema, groups); err != nil {
			return nil, keyErr("schema", fmt.Errorf("schema template %w", err))
		}
	}
	if !c.table.routed() && !c.schema.routed() {
		return nil, nil
	}
	key := "table"
	if !c.table.routed() {
		key = "schema"
	}
	switch {
	case len(sc.Children) > 0:
		return nil, keyErr("children", fmt.Errorf("children of a sink whose %s is routed by content: the child tables are named by the topic, so the children of every routed table would share one; remove children, or route by ${topic}", key))
	case sc.PartitionBy.Column != "":
		return nil, keyErr("partition_by", fmt.Errorf("partition_by on a sink whose %s is routed by content: routed tables are created on first use, unpartitioned; remove partition_by, or partition the routed tables yourself", key))
	case changeFormat(sc.Format) || registryFormat(sc.Format):
		return nil, keyErr(key, fmt.Errorf("format %s takes its table from the records' schema, which a routed %s cannot follow: ${value...} and ${header...} are for formats json, text and bytes; route by ${topic} instead", sc.Format, key))
	case cmp.Or(sc.Format, "json") != "json" && (c.table.readsValue() || c.schema.readsValue()):
		return nil, keyErr(key, fmt.Errorf("${value...} reads the value as JSON, and format %s is not: use format json, or route by ${header.KEY}", sc.Format))
	}
	return c, nil
}

// readsValue reports whether the template reads the record's value.
func (t nameTemplate) readsValue() bool {
	for _, p := range t.parts {
		if p.ref == refValue {
			return true
		}
	}
	return false
}

// text is a record reference as a template writes it.
func (p templatePart) text() string {
	if p.ref == refHeader {
		return "${header." + p.group + "}"
	}
	return "${value." + p.path.String() + "}"
}

// Route names r's table; an error is a bad record of kind route.
func (c *contentRouter) Route(r *stream.Record) (ingest.Route, error) {
	f := &recordFields{r: r}
	rt := ingest.Route{Schema: c.fixedSchema}
	var err error
	if len(c.schema.parts) > 0 {
		if rt.Schema, err = c.name("schema", c.schema, f); err != nil {
			return rt, err
		}
	}
	rt.Table, err = c.name("table", c.table, f)
	return rt, err
}

func (c *contentRouter) name(what string, t nameTemplate, f *recordFields) (string, error) {
	name, err := t.expand(f.r.Topic, c.re, f)
	if err == nil {
		if err = schema.ValidateIdent(what, name); err != nil {
			err = fmt.Errorf("%q gives %w", t.text, err)
		}
	}
	if err != nil {
		r := f.r
		return "", &decode.DecodeError{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Kind: ingest.KindRoute,
			Err: fmt.Errorf("%s template %w", what, err)}
	}
	return name, nil
}

// recordFields reads the fields of one record that templates name; the
// value is decoded once.
type recordFields struct {
	r       *stream.Record
	value   any
	decoded bool
}

// field is the name part of a ${value...} or ${header...} reference.
func (f *recordFields) field(p templatePart) (string, error) {
	if p.ref == refHeader {
		found := false
		var v []byte
		for _, h := range f.r.Headers {
			if h.Key == p.group {
				found, v = true, h.Value
			}
		}
		if !found {
			return "", fmt.Errorf("the record has no header %q", p.group)
		}
		return namePart(p.text(), string(v))
	}
	if !f.decoded {
		if f.r.Value == nil {
			return "", fmt.Errorf("%s: the record has no value (a tombstone): route tombstones by ${header.KEY} or ${topic}", p.text())
		}
		d := json.NewDecoder(bytes.NewReader(f.r.Value))
		d.UseNumber()
		if err := d.Decode(&f.value); err != nil {
			return "", fmt.Errorf("%s: the value is not JSON: %w", p.text(), err)
		}
		f.decoded = true
	}
	v, found, err := p.path.Find(f.value)
	if err != nil {
		return "", fmt.Errorf("%s: %w", p.text(), err)
	}
	if !found {
		return "", fmt.Errorf("%s: the value has no field %s", p.text(), p.path)
	}
	switch x := v.(type) {
	case string:
		return namePart(p.text(), x)
	case json.Number:
		return namePart(p.text(), x.String())
	case nil:
		return "", fmt.Errorf("%s is null", p.text())
	default:
		return "", fmt.Errorf("%s is %s, not a string or a number", p.text(), jsonKind(x))
	}
}

// namePart checks what ref gives a name: not empty, valid UTF-8, and
// only letters, digits, '_', '-' and '.'.
func namePart(ref, v string) (string, error) {
	if v == "" {
		return "", fmt.Errorf("%s is empty", ref)
	}
	if !utf8.ValidString(v) {
		return "", fmt.Errorf("%s is not valid UTF-8", ref)
	}
	if i := strings.IndexFunc(v, func(c rune) bool {
		return !unicode.IsLetter(c) && !unicode.IsDigit(c) && c != '_' && c != '-' && c != '.'
	}); i >= 0 {
		c, _ := utf8.DecodeRuneInString(v[i:])
		return "", fmt.Errorf("%s is %q, whose %q a routed name refuses: letters, digits, _, - and . only", ref, v, c)
	}
	return v, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case bool:
		return "a boolean"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return fmt.Sprintf("a %T", v)
}
