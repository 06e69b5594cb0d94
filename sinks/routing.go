package sinks

import (
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/schema"
)

// Routing: a sink's table and schema are templates of the topic's name,
// so that one topic_regex sink replicates a whole source database, each
// topic into a table of its own (Debezium names a table's topic
// <prefix>.<schema>.<table>). A template is text with references:
//
//	${topic}     the topic's name made a plain identifier (schema.TableNameForTopic)
//	${topic.N}   the N-th dot-separated part of the topic as it is: 1 the
//	             first, 2 the second, -1 the last, -2 the one before
//	${NAME}      what the topic_regex's named group (?P<NAME>...) matched, as it is
//
// Parts and groups keep their case and punctuation: the names are always
// quoted in SQL, so a source table "Order-Items" is replicated as
// "Order-Items". A name a template yields is checked for each topic; one
// that Postgres cannot hold (empty, over 63 bytes) is an error naming the
// topic, as is a part the topic does not have.

// errTopicShape marks a template that a topic cannot fill (a part it lacks,
// a name Postgres cannot hold): the template is right for other topics.
var errTopicShape = errors.New("the topic does not fit the template")

// nameTemplate is a parsed template.
type nameTemplate struct {
	text  string
	parts []templatePart
}

type templatePart struct {
	literal string
	ref     templateRef
	n       int              // refTopicPart: the position
	group   string           // refGroup: the group's name; refHeader: the header's key
	path    decode.ValuePath // refValue: the field's path
}

type templateRef uint8

const (
	refNone templateRef = iota
	refTopic
	refTopicPart
	refGroup
	refValue  // ${value.PATH}: a field of the record's value (route_content.go)
	refHeader // ${header.KEY}: a header of the record (route_content.go)
)

// parseNameTemplate parses text; groups are the named groups of the
// sink's topic_regex (none for a topic sink).
func parseNameTemplate(text string, groups []string) (nameTemplate, error) {
	t := nameTemplate{text: text}
	rest := text
	for {
		i := strings.Index(rest, "${")
		if i < 0 {
			if rest != "" {
				t.parts = append(t.parts, templatePart{literal: rest})
			}
			return t, nil
		}
		if i > 0 {
			t.parts = append(t.parts, templatePart{literal: rest[:i]})
		}
		end := strings.IndexByte(rest[i:], '}')
		if end < 0 {
			return t, fmt.Errorf("%q has a ${ without its }: close it, as in ${topic.2}", text)
		}
		ref := rest[i+2 : i+end]
		rest = rest[i+end+1:]
		field, isValue := strings.CutPrefix(ref, "value.")
		header, isHeader := strings.CutPrefix(ref, "header.")
		switch part, isPart := strings.CutPrefix(ref, "topic."); {
		case isValue:
			p, err := decode.ParseValuePath(field)
			if err != nil {
				return t, fmt.Errorf("%q: ${%s}: %w", text, ref, err)
			}
			t.parts = append(t.parts, templatePart{ref: refValue, path: p})
		case isHeader && header != "":
			t.parts = append(t.parts, templatePart{ref: refHeader, group: header})
		case ref == "value" || ref == "header" || isHeader:
			return t, fmt.Errorf("%q: ${%s} names no field: write ${value.FIELD} (a field of the JSON value, ${value.a.b} nested) or ${header.KEY}", text, ref)
		case ref == "topic":
			t.parts = append(t.parts, templatePart{ref: refTopic})
		case isPart:
			n, err := strconv.Atoi(part)
			if err != nil || n == 0 {
				return t, fmt.Errorf("%q: ${%s} names no part of the topic: parts count from 1 (${topic.1} is the first) or from the end (${topic.-1} is the last)", text, ref)
			}
			t.parts = append(t.parts, templatePart{ref: refTopicPart, n: n})
		case slices.Contains(groups, ref):
			t.parts = append(t.parts, templatePart{ref: refGroup, group: ref})
		case len(groups) == 0:
			return t, fmt.Errorf("%q: ${%s} is not ${topic}, ${topic.N}, ${value.FIELD} or ${header.KEY}: a named group (?P<%s>...) is a part of a topic_regex sink's topic", text, ref, ref)
		default:
			return t, fmt.Errorf("%q: ${%s} is not ${topic}, ${topic.N}, ${value.FIELD}, ${header.KEY} or a named group of topic_regex (it has %s): name the group (?P<%s>...) in topic_regex", text, ref, strings.Join(groups, ", "), ref)
		}
	}
}

// routed reports whether the template reads the record (its value or
// its headers), not only its topic.
func (t nameTemplate) routed() bool {
	return slices.ContainsFunc(t.parts, func(p templatePart) bool { return p.ref == refValue || p.ref == refHeader })
}

// expand is the template for topic; re is the sink's anchored topic_regex
// (nil for a topic sink), which must match topic when a group is used.
// rec gives the references to the record's value and headers; nil keeps
// them as the template writes them, for the name that stands for all the
// tables of a routed sink.
func (t nameTemplate) expand(topic string, re *regexp.Regexp, rec *recordFields) (string, error) {
	var b strings.Builder
	var match []string
	for _, p := range t.parts {
		switch p.ref {
		case refNone:
			b.WriteString(p.literal)
		case refValue, refHeader:
			if rec == nil {
				b.WriteString(p.text())
				continue
			}
			v, err := rec.field(p)
			if err != nil {
				return "", fmt.Errorf("%q: %w", t.text, err)
			}
			b.WriteString(v)
		case refTopic:
			b.WriteString(schema.TableNameForTopic(topic))
		case refTopicPart:
			parts := strings.Split(topic, ".")
			i := p.n - 1
			if p.n < 0 {
				i = len(parts) + p.n
			}
			if i < 0 || i >= len(parts) {
				return "", &shapeError{fmt.Errorf("%q: topic %q has %d dot-separated part(s), so ${topic.%d} names none: match only topics that have it in topic_regex, or count from the end (${topic.-1} is the last)", t.text, topic, len(parts), p.n)}
			}
			b.WriteString(parts[i])
		case refGroup:
			if match == nil {
				if re == nil {
					return "", fmt.Errorf("%q: ${%s} needs topic_regex", t.text, p.group)
				}
				if match = re.FindStringSubmatch(topic); match == nil {
					return "", &shapeError{fmt.Errorf("%q: topic %q does not match topic_regex", t.text, topic)}
				}
			}
			b.WriteString(match[re.SubexpIndex(p.group)])
		}
	}
	return b.String(), nil
}

// routeName is the table or schema name (what) a sink's template gives a
// topic, checked as an identifier: every error names the template, the
// topic and the fix.
func routeName(what, template, topic string, re *regexp.Regexp, groups []string) (string, error) {
	t, err := parseNameTemplate(template, groups)
	if err != nil {
		return "", fmt.Errorf("%s template %w", what, err)
	}
	name, err := t.expand(topic, re, nil)
	if err != nil {
		return "", fmt.Errorf("%s template %w", what, err)
	}
	if t.routed() {
		return name, nil // each record's name is checked as it is routed
	}
	if err := schema.ValidateIdent(what, name); err != nil {
		if name == template {
			return "", err
		}
		return "", &shapeError{fmt.Errorf("%s template %q gives %q for topic %q: %w", what, template, name, topic, err)}
	}
	return name, nil
}

// shapeError is an error of errTopicShape.
type shapeError struct{ err error }

func (e *shapeError) Error() string   { return e.err.Error() }
func (e *shapeError) Unwrap() []error { return []error{e.err, errTopicShape} }

// sinkRegex compiles a topic_regex anchored, as the subscription uses it.
func sinkRegex(regex string) (*regexp.Regexp, error) {
	re, err := regexp.Compile("^(?:" + regex + ")$")
	if err != nil {
		return nil, fmt.Errorf("topic_regex %q does not compile: %w", regex, err)
	}
	return re, nil
}

// groupNames are the named groups of a topic_regex; none when it does not
// compile (the sink's check says so).
func groupNames(regex string) []string {
	if regex == "" {
		return nil
	}
	re, err := regexp.Compile(regex)
	if err != nil {
		return nil
	}
	var out []string
	for _, n := range re.SubexpNames() {
		if n != "" {
			out = append(out, n)
		}
	}
	return out
}

// topicLike is a topic name that the anchored topic_regex re matches,
// for building a topic_regex sink before any topic is seen: each
// repetition once, each alternation's first branch, each class's first
// character. "probe" when no such name comes out.
func topicLike(regex string, re *regexp.Regexp) string {
	if tree, err := syntax.Parse(regex, syntax.Perl); err == nil {
		var b strings.Builder
		if sampleOf(tree.Simplify(), &b) && re.MatchString(b.String()) {
			return b.String()
		}
	}
	return "probe"
}

func sampleOf(re *syntax.Regexp, b *strings.Builder) bool {
	switch re.Op {
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			b.WriteRune(r)
		}
	case syntax.OpCharClass:
		if len(re.Rune) == 0 {
			return false
		}
		b.WriteRune(classSample(re.Rune))
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		b.WriteByte('x')
	case syntax.OpCapture, syntax.OpStar, syntax.OpPlus, syntax.OpQuest:
		return sampleOf(re.Sub[0], b)
	case syntax.OpRepeat:
		for range max(re.Min, 1) {
			if !sampleOf(re.Sub[0], b) {
				return false
			}
		}
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			if !sampleOf(sub, b) {
				return false
			}
		}
	case syntax.OpAlternate:
		return sampleOf(re.Sub[0], b)
	case syntax.OpNoMatch:
		return false
	}
	return true // the empty-width operators write nothing
}

// classSample is a character of a class (pairs of rune ranges) that a
// topic name would have: a letter, a digit, '_' or '-' if the class has
// one, else its first.
func classSample(ranges []rune) rune {
	for _, c := range "xabcdefghijklmnopqrstuvwyz0123456789_-" {
		for i := 0; i+1 < len(ranges); i += 2 {
			if ranges[i] <= c && c <= ranges[i+1] {
				return c
			}
		}
	}
	return ranges[0]
}
