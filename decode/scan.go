package decode

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf8"
)

// The single-pass scanner behind JSONMapper.Row. It validates a whole JSON
// document exactly as decodeJSON does (encoding/json's grammar and nesting
// limit, UTF-8, no lone surrogate escape) and, in the same pass, records
// where the values the columns' paths need are, as byte spans of the
// document, without building a tree. The converters then read those spans.
// Anything the scanner refuses is handed to decodeJSON, which refuses it too
// and says why in its usual words; FuzzScanMatchesDecode holds the two to
// the same answers.

// valueKind is the kind of a scanned JSON value; kindAbsent marks a path
// node the document does not reach.
type valueKind uint8

const (
	kindAbsent valueKind = iota
	kindNull
	kindFalse
	kindTrue
	kindNumber
	kindString
	kindObject
	kindArray
)

// maxNestingDepth is encoding/json's limit on nested objects and arrays.
const maxNestingDepth = 10000

// pathTree is the union of the paths of the columns that read one document
// (the value or the key), one node per distinct path prefix. Node 0 is the
// document. Nodes are numbered in preorder, so a node's subtree is the range
// [id, end).
type pathTree struct {
	nodes []pathNode
}

type pathNode struct {
	members []memberEdge
	indexes []indexEdge
	end     int32 // one past the last node of the subtree
	negIdx  bool  // some index edge counts from the end
}

type memberEdge struct {
	key  string
	node int32
	// plain: key has no byte JSON must escape (and is valid UTF-8), so a
	// document names it exactly when its raw bytes are the key's.
	plain bool
	// word and mask: a plain key of up to seven bytes and its closing
	// quote as one little-endian word, and the bytes of it that count
	// (mask 0: a longer key), so that at compares them in one go.
	word, mask uint64
}

// newMemberEdge is the edge to node for the member key.
func newMemberEdge(key string, node int32) memberEdge {
	e := memberEdge{key: key, node: node, plain: plainKey(key)}
	if e.plain && len(key) < 8 {
		var b [8]byte
		copy(b[:], key+`"`)
		e.word = binary.LittleEndian.Uint64(b[:])
		e.mask = ^uint64(0) >> (64 - 8*(len(key)+1))
	}
	return e
}

// at says d holds the key, plain, and a closing quote at d[i:].
func (e *memberEdge) at(d []byte, i int) bool {
	if len(d)-i >= 8 && e.mask != 0 {
		return binary.LittleEndian.Uint64(d[i:])&e.mask == e.word
	}
	return e.plain && keyAt(d, i, e.key)
}

type indexEdge struct {
	index int
	node  int32
}

// pathTrie builds a pathTree; it is a plain tree first and numbered once
// every path is in.
type pathTrie struct {
	members map[string]*pathTrie
	keys    []string // members in insertion order
	indexes map[int]*pathTrie
	idxs    []int
	ids     []*int32 // the columns waiting for this node's id
}

// add puts the path in and returns where its node ids will be written:
// ids[n] is the node after n steps.
func (t *pathTrie) add(steps []pathStep) []int32 {
	ids := make([]int32, len(steps)+1)
	cur := t
	cur.ids = append(cur.ids, &ids[0])
	for n, st := range steps {
		var next *pathTrie
		if st.isIndex {
			if cur.indexes == nil {
				cur.indexes = map[int]*pathTrie{}
			}
			if next = cur.indexes[st.index]; next == nil {
				next = &pathTrie{}
				cur.indexes[st.index] = next
				cur.idxs = append(cur.idxs, st.index)
			}
		} else {
			if cur.members == nil {
				cur.members = map[string]*pathTrie{}
			}
			if next = cur.members[st.key]; next == nil {
				next = &pathTrie{}
				cur.members[st.key] = next
				cur.keys = append(cur.keys, st.key)
			}
		}
		cur = next
		cur.ids = append(cur.ids, &ids[n+1])
	}
	return ids
}

// build numbers the nodes in preorder, fills the ids add handed out, and
// returns the tree.
func (t *pathTrie) build() *pathTree {
	tree := &pathTree{}
	var number func(n *pathTrie) int32
	number = func(n *pathTrie) int32 {
		id := int32(len(tree.nodes))
		tree.nodes = append(tree.nodes, pathNode{})
		for _, p := range n.ids {
			*p = id
		}
		var node pathNode
		for _, k := range n.keys {
			node.members = append(node.members, newMemberEdge(k, number(n.members[k])))
		}
		for _, i := range n.idxs {
			node.indexes = append(node.indexes, indexEdge{index: i, node: number(n.indexes[i])})
			node.negIdx = node.negIdx || i < 0
		}
		node.end = int32(len(tree.nodes))
		tree.nodes[id] = node
		return id
	}
	number(t)
	return tree
}

// plainKey says k is written in JSON as its own bytes between quotes.
func plainKey(k string) bool {
	for i := 0; i < len(k); i++ {
		if c := k[i]; c < 0x20 || c == '"' || c == '\\' {
			return false
		}
	}
	return utf8.ValidString(k)
}

// rootTree is the tree of the path "$" alone.
var rootTree = (&pathTrie{}).build()

// hit is where the document has the value of one path node.
type hit struct {
	kind       valueKind
	esc        bool // a string with escapes
	start, end int32
}

// scanner is the state of one scan; JSONMapper keeps them in a pool. The
// position in the document is not in it: the scanning functions take it
// and return it, so that the compiler may keep it in a register instead of
// storing and loading it through the pointer at every step.
type scanner struct {
	data  []byte
	tree  *pathTree
	hits  []hit   // by node id
	elems []int32 // element offsets of arrays indexed from the end
	depth int
	lone  bool // a lone surrogate escape, which jsonb cannot store
	key   []byte
}

// scan validates doc and records the hits of tree's nodes. false means doc
// is not a document decodeJSON accepts.
func (s *scanner) scan(doc []byte, tree *pathTree) bool {
	s.data, s.tree, s.depth, s.lone = doc, tree, 0, false
	s.elems = s.elems[:0]
	if cap(s.hits) < len(tree.nodes) {
		s.hits = make([]hit, len(tree.nodes))
	}
	s.hits = s.hits[:len(tree.nodes)]
	clear(s.hits)
	// UTF-8 is checked in strings (str): a byte over 0x7f anywhere else
	// is not JSON's grammar, which refuses it there.
	if len(doc) > 1<<31-1 {
		return false
	}
	i, ok := s.value(doc, skipSpace(doc, 0), 0)
	if !ok {
		return false
	}
	return skipSpace(doc, i) == len(doc) && !s.lone
}

// skipSpace is the index of the first byte of d from i on that is not
// JSON's white space.
func skipSpace(d []byte, i int) int {
	// A byte over ' ' (the common case: no space at all) ends it at the
	// first comparison.
	for i < len(d) && d[i] <= ' ' && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r') {
		i++
	}
	return i
}

// value scans the value at d[i:] and records it as node (-1: no node). It
// returns the index after the value.
func (s *scanner) value(d []byte, i int, node int32) (int, bool) {
	if i >= len(d) {
		return i, false
	}
	start := i
	var k valueKind
	esc, ok := false, false
	switch c := d[i]; {
	case c == '"':
		k = kindString
		i, esc, ok = s.str(d, i)
	case c == '{':
		k = kindObject
		i, ok = s.object(d, i, node)
	case c == '[':
		k = kindArray
		i, ok = s.array(d, i, node)
	case c == '-' || (c >= '0' && c <= '9'):
		k = kindNumber
		i, ok = number(d, i)
	case c == 't':
		k = kindTrue
		i, ok = literal(d, i, "true")
	case c == 'f':
		k = kindFalse
		i, ok = literal(d, i, "false")
	case c == 'n':
		k = kindNull
		i, ok = literal(d, i, "null")
	}
	if !ok {
		return i, false
	}
	if node >= 0 {
		s.hits[node] = hit{kind: k, esc: esc, start: int32(start), end: int32(i)}
	}
	return i, true
}

// literal checks that d has lit at d[i:] and returns the index after it.
func literal(d []byte, i int, lit string) (int, bool) {
	if len(d)-i < len(lit) || string(d[i:i+len(lit)]) != lit {
		return i, false
	}
	return i + len(lit), true
}

// number scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? at d[i:] and
// returns the index after it.
func number(d []byte, i int) (int, bool) {
	if d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		for i++; i < len(d) && d[i] >= '0' && d[i] <= '9'; i++ {
		}
	default:
		return i, false
	}
	if i < len(d) && d[i] == '.' {
		i++
		j := i
		for ; i < len(d) && d[i] >= '0' && d[i] <= '9'; i++ {
		}
		if i == j {
			return i, false
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		j := i
		for ; i < len(d) && d[i] >= '0' && d[i] <= '9'; i++ {
		}
		if i == j {
			return i, false
		}
	}
	return i, true
}

// str scans the string whose opening quote is d[i] and returns the index
// after its closing quote; esc says it has escapes. Lone surrogate escapes
// set s.lone, as checkEscapes would refuse them.
func (s *scanner) str(d []byte, i int) (end int, esc, ok bool) {
	for i++; i < len(d); {
		// Eight bytes at a time while none needs a look (see plainRun).
		if len(d)-i >= 8 {
			n := plainRun(binary.LittleEndian.Uint64(d[i:]))
			if i += n; n == 8 {
				continue
			}
		}
		c := d[i]
		if !stringStop[c] {
			i++
			continue
		}
		switch {
		case c == '"':
			return i + 1, esc, true
		case c < 0x20:
			return i, false, false
		case c >= utf8.RuneSelf:
			if r, n := utf8.DecodeRune(d[i:]); r == utf8.RuneError && n == 1 {
				return i, false, false
			} else {
				i += n
			}
			continue
		}
		esc = true
		if i+1 >= len(d) {
			return i, false, false
		}
		switch d[i+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i += 2
		case 'u':
			cp, ok := hex4At(d, i+2)
			if !ok {
				return i, false, false
			}
			i += 6
			switch {
			case cp >= 0xD800 && cp <= 0xDBFF:
				if lo, ok := hex4At(d, i+2); ok && d[i] == '\\' && d[i+1] == 'u' && lo >= 0xDC00 && lo <= 0xDFFF {
					i += 6
				} else {
					s.lone = true
				}
			case cp >= 0xDC00 && cp <= 0xDFFF:
				s.lone = true
			}
		default:
			return i, false, false
		}
	}
	return i, false, false
}

// plainRun is how many of the eight bytes of w (little-endian: the first
// byte lowest) come before the first that stringStop marks: a quote, a
// backslash, a control character or a byte over 0x7f. The tests of each
// byte are exact for the lowest byte that meets them (a borrow runs only
// upwards from a byte that does), which is the one that counts.
func plainRun(w uint64) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	ctl := w - 0x20*ones // below 0x20 (over 0x7f too, as w is)
	q := w ^ '"'*ones
	q = (q - ones) &^ q // a quote
	bs := w ^ '\\'*ones
	bs = (bs - ones) &^ bs                               // a backslash
	return bits.TrailingZeros64((ctl|q|bs|w)&highs) >> 3 // w: over 0x7f
}

// stringStop marks the bytes a string scan must look at: the quote, the
// backslash, the control characters JSON refuses in strings and the bytes
// of multi-byte UTF-8, which must be valid.
var stringStop = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	for c := utf8.RuneSelf; c < 256; c++ {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// hex4At reads four hex digits at d[at:].
func hex4At(d []byte, at int) (rune, bool) {
	if at < 0 || at+4 > len(d) {
		return 0, false
	}
	var r rune
	for _, c := range d[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// object scans the object whose '{' is d[i] and returns the index after
// its '}'.
func (s *scanner) object(d []byte, i int, node int32) (int, bool) {
	s.depth++
	if s.depth > maxNestingDepth {
		return i, false
	}
	var members []memberEdge
	if node >= 0 {
		members = s.tree.nodes[node].members
	}
	i = skipSpace(d, i+1)
	if i < len(d) && d[i] == '}' {
		s.depth--
		return i + 1, true
	}
	// Documents of a topic mostly name their members in the same order, and
	// the tree's members follow the mapping's columns: the member after the
	// last one found is tried first, by comparing bytes, which spares the
	// string scan and the lookup when it is the one.
	next := 0
	for {
		if i >= len(d) || d[i] != '"' {
			return i, false
		}
		child := int32(-1)
		if next < len(members) && members[next].at(d, i+1) {
			child = members[next].node
			i += len(members[next].key) + 2
			next++
		} else {
			keyStart := i
			var esc, ok bool
			if i, esc, ok = s.str(d, i); !ok {
				return i, false
			}
			if len(members) > 0 {
				if m := s.member(members, d[keyStart+1:i-1], esc); m >= 0 {
					child, next = members[m].node, m+1
				}
			}
		}
		i = skipSpace(d, i)
		if i >= len(d) || d[i] != ':' {
			return i, false
		}
		i = skipSpace(d, i+1)
		if child >= 0 && s.hits[child].kind != kindAbsent {
			// A later duplicate member replaces the earlier one, as in
			// encoding/json's map. (A node's hit is written after its
			// subtree's, so a subtree under an absent node is empty.)
			clear(s.hits[child:s.tree.nodes[child].end])
		}
		var ok bool
		if i, ok = s.value(d, i, child); !ok {
			return i, false
		}
		i = skipSpace(d, i)
		if i >= len(d) {
			return i, false
		}
		switch d[i] {
		case ',':
			i = skipSpace(d, i+1)
		case '}':
			s.depth--
			return i + 1, true
		default:
			return i, false
		}
	}
}

// member finds the index of the member named by the raw key; -1 if none.
func (s *scanner) member(members []memberEdge, raw []byte, esc bool) int {
	key := raw
	if esc {
		s.key = appendUnquoted(s.key[:0], raw)
		key = s.key
	}
	for i, e := range members {
		if string(key) == e.key {
			return i
		}
	}
	return -1
}

// keyAt says d holds key and a closing quote at d[at:].
func keyAt(d []byte, at int, key string) bool {
	end := at + len(key)
	return end < len(d) && d[end] == '"' && string(d[at:end]) == key
}

// array scans the array whose '[' is d[i] and returns the index after its
// ']'.
func (s *scanner) array(d []byte, i int, node int32) (int, bool) {
	s.depth++
	if s.depth > maxNestingDepth {
		return i, false
	}
	var indexes []indexEdge
	neg := false
	if node >= 0 {
		n := &s.tree.nodes[node]
		indexes, neg = n.indexes, n.negIdx
	}
	base := len(s.elems)
	i = skipSpace(d, i+1)
	if i < len(d) && d[i] == ']' {
		s.depth--
		return i + 1, true
	}
	n := 0
	for {
		child := int32(-1)
		for _, e := range indexes {
			if e.index == n {
				child = e.node
				break
			}
		}
		if neg {
			s.elems = append(s.elems, int32(i))
		}
		var ok bool
		if i, ok = s.value(d, i, child); !ok {
			return i, false
		}
		n++
		i = skipSpace(d, i)
		if i >= len(d) {
			return i, false
		}
		if d[i] == ',' {
			i = skipSpace(d, i+1)
			continue
		}
		if d[i] != ']' {
			return i, false
		}
		i++
		break
	}
	if neg {
		// Elements counted from the end are known now: scan them again,
		// valid as they are, for their nodes.
		for _, e := range indexes {
			if e.index >= 0 || e.index+n < 0 {
				continue
			}
			clear(s.hits[e.node:s.tree.nodes[e.node].end])
			s.value(d, int(s.elems[base+e.index+n]), e.node)
		}
		s.elems = s.elems[:base]
	}
	s.depth--
	return i, true
}

// appendUnquoted appends the text of the JSON string body raw (between the
// quotes, valid, without lone surrogates) to dst.
func appendUnquoted(dst, raw []byte) []byte {
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			j := i + 1
			for j < len(raw) && raw[j] != '\\' {
				j++
			}
			dst = append(dst, raw[i:j]...)
			i = j
			continue
		}
		switch e := raw[i+1]; e {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, _ := hex4At(raw, i+2)
			if r >= 0xD800 && r <= 0xDBFF {
				lo, _ := hex4At(raw, i+8)
				r = (r-0xD800)<<10 | (lo - 0xDC00) + 0x10000
				i += 6
			}
			dst = utf8.AppendRune(dst, r)
			i += 6
			continue
		default: // '"', '\\', '/'
			dst = append(dst, e)
		}
		i += 2
	}
	return dst
}
