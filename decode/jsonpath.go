package decode

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// A JSON path picks one value out of a document. The syntax is a small,
// unambiguous subset of JSONPath:
//
//	$                    the whole document
//	id                   the member "id" of the top-level object
//	customer.address.zip nested members ($.customer.address.zip is the same)
//	items[0].sku         an array element; [-1] is the last one
//	["a.b"]["x y"]       a member whose name has '.', '[' or spaces, as a
//	                     JSON string
//
// A member that is absent or an index past the end is "missing"; a null on
// the way makes the value null; a step into a value of the wrong kind (a
// member of a number) is a type mismatch.

// jsonPath is a parsed path.
type jsonPath struct {
	text  string
	steps []pathStep
}

// pathStep is one member name or one array index.
type pathStep struct {
	key     string
	index   int
	isIndex bool
}

// parsePath parses the syntax above; the error says where it went wrong.
func parsePath(s string) (jsonPath, error) {
	p := jsonPath{text: s}
	i := 0
	if strings.HasPrefix(s, "$") {
		i = 1
		if len(s) > 1 && s[1] != '.' && s[1] != '[' {
			return p, fmt.Errorf("path %q: after $ comes . or [", s)
		}
		if len(s) > 1 && s[1] == '.' {
			i = 2
			if i == len(s) {
				return p, fmt.Errorf("path %q ends with a dot: name a member after it", s)
			}
		}
	} else if s == "" {
		return p, fmt.Errorf("path is empty: write a member name, or $ for the whole document")
	}
	first := i
	for i < len(s) {
		switch {
		case s[i] == '[':
			j := i + 1
			if j < len(s) && s[j] == '"' {
				end, key, err := quotedKey(s, j)
				if err != nil {
					return p, fmt.Errorf("path %q at byte %d: %w", s, j, err)
				}
				if end >= len(s) || s[end] != ']' {
					return p, fmt.Errorf("path %q at byte %d: a quoted member name ends with \"]", s, end)
				}
				p.steps = append(p.steps, pathStep{key: key})
				i = end + 1
			} else {
				end := strings.IndexByte(s[j:], ']')
				if end < 0 {
					return p, fmt.Errorf("path %q at byte %d: [ is not closed by ]", s, i)
				}
				n, err := strconv.Atoi(s[j : j+end])
				if err != nil || strings.HasPrefix(s[j:j+end], "+") {
					return p, fmt.Errorf("path %q at byte %d: %q is not an array index: write [0], [1], [-1] or [\"name\"]", s, j, s[j:j+end])
				}
				p.steps = append(p.steps, pathStep{index: n, isIndex: true})
				i = j + end + 1
			}
		case i > first && s[i] != '.':
			return p, fmt.Errorf("path %q at byte %d: expected . or [ after ]", s, i)
		default:
			if i > first {
				i++ // the dot
			}
			j := i
			for j < len(s) && s[j] != '.' && s[j] != '[' {
				if s[j] == ']' || s[j] == '"' {
					return p, fmt.Errorf("path %q at byte %d: %q is not allowed in a plain member name: write [\"name\"]", s, j, s[j])
				}
				j++
			}
			if j == i {
				return p, fmt.Errorf("path %q at byte %d: a member name is empty", s, i)
			}
			p.steps = append(p.steps, pathStep{key: s[i:j]})
			i = j
		}
	}
	return p, nil
}

// quotedKey reads the JSON string starting at s[at] == '"'; end is the
// index after the closing quote.
func quotedKey(s string, at int) (end int, key string, err error) {
	for j := at + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '"':
			if err := json.Unmarshal([]byte(s[at:j+1]), &key); err != nil {
				return 0, "", fmt.Errorf("the quoted member name is not a JSON string: %w", err)
			}
			return j + 1, key, nil
		}
	}
	return 0, "", fmt.Errorf("the quoted member name has no closing quote")
}

// resolve finds the path's value among a scan's hits; nodes are the path's
// node ids (see pathTrie.add). found is false when a member or element is
// absent; a null on the way gives a null hit, found.
func (p jsonPath) resolve(hits []hit, nodes []int32) (h hit, found bool, cerr *convError) {
	// The scan writes a node's hit only inside its parent's value, and a
	// parent's later duplicate clears its subtree: a leaf hit means every
	// step on the way was there, of the right kind and not null.
	if h := hits[nodes[len(p.steps)]]; h.kind != kindAbsent {
		return h, true, nil
	}
	for n, st := range p.steps {
		cur := hits[nodes[n]]
		switch {
		case cur.kind == kindNull:
			return cur, true, nil
		case st.isIndex && cur.kind != kindArray:
			return hit{}, false, convErrorf(KindTypeMismatch, "path %s: %s is %s, not an array", p.text, p.prefix(n), kindName(cur.kind))
		case !st.isIndex && cur.kind != kindObject:
			return hit{}, false, convErrorf(KindTypeMismatch, "path %s: %s is %s, not an object", p.text, p.prefix(n), kindName(cur.kind))
		}
		if hits[nodes[n+1]].kind == kindAbsent {
			return hit{}, false, nil
		}
	}
	return hits[nodes[len(p.steps)]], true, nil
}

// prefix renders the first n steps, for messages.
func (p jsonPath) prefix(n int) string {
	var b strings.Builder
	b.WriteString("$")
	for _, st := range p.steps[:n] {
		if st.isIndex {
			fmt.Fprintf(&b, "[%d]", st.index)
		} else {
			q, _ := json.Marshal(st.key)
			fmt.Fprintf(&b, "[%s]", q)
		}
	}
	return b.String()
}
