package decode

import (
	"fmt"
)

// ValuePath is a parsed JSON path (the syntax of a column's path) that
// picks a value out of a document json.Unmarshal decoded (objects as
// map[string]any, arrays as []any): what a sink's name template reads
// with ${value.path}.
type ValuePath struct{ p jsonPath }

// ParseValuePath parses s; the error says where it went wrong.
func ParseValuePath(s string) (ValuePath, error) {
	p, err := parsePath(s)
	return ValuePath{p}, err
}

// String is the path as written.
func (v ValuePath) String() string { return v.p.text }

// Find is the value at the path in doc: found is false when a member is
// absent or an index is past the end; a null on the way is a nil value,
// found. A step into a value of the wrong kind (a member of a number) is
// an error naming the step.
func (v ValuePath) Find(doc any) (value any, found bool, err error) {
	cur := doc
	for n, st := range v.p.steps {
		switch x := cur.(type) {
		case nil:
			return nil, true, nil
		case map[string]any:
			if st.isIndex {
				return nil, false, fmt.Errorf("path %s: %s is an object, not an array", v.p.text, v.p.prefix(n))
			}
			if cur, found = x[st.key]; !found {
				return nil, false, nil
			}
		case []any:
			if !st.isIndex {
				return nil, false, fmt.Errorf("path %s: %s is an array, not an object", v.p.text, v.p.prefix(n))
			}
			i := st.index
			if i < 0 {
				i += len(x)
			}
			if i < 0 || i >= len(x) {
				return nil, false, nil
			}
			cur = x[i]
		default:
			return nil, false, fmt.Errorf("path %s: %s is a %T, not an object or an array", v.p.text, v.p.prefix(n), x)
		}
	}
	return cur, true, nil
}
