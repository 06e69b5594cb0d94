package schema

import (
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
			node.members = append(node.members, memberEdge{key: k, node: number(n.members[k]), plain: plainKey(k)})
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

// scanner is the state of one scan; JSONMapper keeps them in a pool.
type scanner struct {
	data  []byte
	pos   int
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
	s.data, s.pos, s.tree, s.depth, s.lone = doc, 0, tree, 0, false
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
	s.skipSpace()
	if !s.value(0) {
		return false
	}
	s.skipSpace()
	return s.pos == len(doc) && !s.lone
}

func (s *scanner) skipSpace() {
	for s.pos < len(s.data) {
		switch c := s.data[s.pos]; {
		case c > ' ': // the common case first: no space at all
			return
		case c == ' ', c == '\t', c == '\n', c == '\r':
			s.pos++
		default:
			return
		}
	}
}

// value scans the value at s.pos and records it as node (-1: no node).
func (s *scanner) value(node int32) bool {
	d := s.data
	if s.pos >= len(d) {
		return false
	}
	start := s.pos
	var k valueKind
	esc := false
	switch c := d[start]; {
	case c == '{':
		k = kindObject
		if !s.object(node) {
			return false
		}
	case c == '[':
		k = kindArray
		if !s.array(node) {
			return false
		}
	case c == '"':
		k = kindString
		var ok bool
		if esc, ok = s.str(); !ok {
			return false
		}
	case c == 't':
		k = kindTrue
		if !s.literal("true") {
			return false
		}
	case c == 'f':
		k = kindFalse
		if !s.literal("false") {
			return false
		}
	case c == 'n':
		k = kindNull
		if !s.literal("null") {
			return false
		}
	case c == '-' || (c >= '0' && c <= '9'):
		k = kindNumber
		if !s.number() {
			return false
		}
	default:
		return false
	}
	if node >= 0 {
		s.hits[node] = hit{kind: k, esc: esc, start: int32(start), end: int32(s.pos)}
	}
	return true
}

func (s *scanner) literal(lit string) bool {
	if len(s.data)-s.pos < len(lit) || string(s.data[s.pos:s.pos+len(lit)]) != lit {
		return false
	}
	s.pos += len(lit)
	return true
}

// number scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() bool {
	d, i := s.data, s.pos
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
		return false
	}
	if i < len(d) && d[i] == '.' {
		i++
		j := i
		for ; i < len(d) && d[i] >= '0' && d[i] <= '9'; i++ {
		}
		if i == j {
			return false
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
			return false
		}
	}
	s.pos = i
	return true
}

// str scans the string at s.pos; esc says it has escapes. Lone surrogate
// escapes set s.lone, as checkEscapes would refuse them.
func (s *scanner) str() (esc, ok bool) {
	d := s.data
	for i := s.pos + 1; i < len(d); {
		c := d[i]
		if !stringStop[c] {
			i++
			continue
		}
		switch {
		case c == '"':
			s.pos = i + 1
			return esc, true
		case c < 0x20:
			return false, false
		case c >= utf8.RuneSelf:
			if r, n := utf8.DecodeRune(d[i:]); r == utf8.RuneError && n == 1 {
				return false, false
			} else {
				i += n
			}
			continue
		}
		esc = true
		if i+1 >= len(d) {
			return false, false
		}
		switch d[i+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i += 2
		case 'u':
			cp, ok := hex4At(d, i+2)
			if !ok {
				return false, false
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
			return false, false
		}
	}
	return false, false
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

func (s *scanner) object(node int32) bool {
	s.depth++
	if s.depth > maxNestingDepth {
		return false
	}
	d := s.data
	var members []memberEdge
	if node >= 0 {
		members = s.tree.nodes[node].members
	}
	s.pos++
	s.skipSpace()
	if s.pos < len(d) && d[s.pos] == '}' {
		s.pos++
		s.depth--
		return true
	}
	// Documents of a topic mostly name their members in the same order, and
	// the tree's members follow the mapping's columns: the member after the
	// last one found is tried first, by comparing bytes, which spares the
	// string scan and the lookup when it is the one.
	next := 0
	for {
		if s.pos >= len(d) || d[s.pos] != '"' {
			return false
		}
		child := int32(-1)
		if e := members[min(next, len(members)):]; len(e) > 0 && e[0].plain && keyAt(d, s.pos+1, e[0].key) {
			child = e[0].node
			s.pos += len(e[0].key) + 2
			next++
		} else {
			keyStart := s.pos
			esc, ok := s.str()
			if !ok {
				return false
			}
			if len(members) > 0 {
				if i := s.member(members, d[keyStart+1:s.pos-1], esc); i >= 0 {
					child, next = members[i].node, i+1
				}
			}
		}
		s.skipSpace()
		if s.pos >= len(d) || d[s.pos] != ':' {
			return false
		}
		s.pos++
		s.skipSpace()
		if child >= 0 && s.hits[child].kind != kindAbsent {
			// A later duplicate member replaces the earlier one, as in
			// encoding/json's map. (A node's hit is written after its
			// subtree's, so a subtree under an absent node is empty.)
			clear(s.hits[child:s.tree.nodes[child].end])
		}
		if !s.value(child) {
			return false
		}
		s.skipSpace()
		if s.pos >= len(d) {
			return false
		}
		switch d[s.pos] {
		case ',':
			s.pos++
			s.skipSpace()
		case '}':
			s.pos++
			s.depth--
			return true
		default:
			return false
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

func (s *scanner) array(node int32) bool {
	s.depth++
	if s.depth > maxNestingDepth {
		return false
	}
	d := s.data
	var indexes []indexEdge
	neg := false
	if node >= 0 {
		n := &s.tree.nodes[node]
		indexes, neg = n.indexes, n.negIdx
	}
	base := len(s.elems)
	s.pos++
	s.skipSpace()
	if s.pos < len(d) && d[s.pos] == ']' {
		s.pos++
		s.depth--
		return true
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
			s.elems = append(s.elems, int32(s.pos))
		}
		if !s.value(child) {
			return false
		}
		n++
		s.skipSpace()
		if s.pos >= len(d) {
			return false
		}
		switch d[s.pos] {
		case ',':
			s.pos++
			s.skipSpace()
			continue
		case ']':
			s.pos++
		default:
			return false
		}
		break
	}
	if neg {
		// Elements counted from the end are known now: scan them again,
		// valid as they are, for their nodes.
		end := s.pos
		for _, e := range indexes {
			if e.index >= 0 || e.index+n < 0 {
				continue
			}
			clear(s.hits[e.node:s.tree.nodes[e.node].end])
			s.pos = int(s.elems[base+e.index+n])
			s.value(e.node)
		}
		s.pos = end
		s.elems = s.elems[:base]
	}
	s.depth--
	return true
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
