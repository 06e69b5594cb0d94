package decode

import "encoding/binary"

// The scanner's pieces, for a reader that pulls a document value by value
// instead of scanning it whole (package cdc, led by a Kafka Connect
// schema). They accept and refuse exactly what the scanner does, so the two
// readers agree on what JSON is; a refusal says nothing of why: CheckJSON
// on the document does.

// MaxJSONDepth is the nesting limit of objects and arrays, encoding/json's.
const MaxJSONDepth = maxNestingDepth

// ScanJSONString scans the string whose opening quote is d[i] and returns
// the index after its closing quote. esc says the string has escapes (read
// it with AppendJSONUnquoted), lone that one is a lone UTF-16 surrogate,
// which no Postgres text or jsonb can store; ok is false when the string is
// not valid JSON or not valid UTF-8.
func ScanJSONString(d []byte, i int) (end int, esc, lone, ok bool) {
	var s scanner // str's only state is lone
	end, esc, ok = s.str(d, i)
	return end, esc, s.lone, ok
}

// ScanJSONNumber scans the number at d[i:] (i < len(d)) and returns the
// index after it; ok is false when it is not JSON's grammar.
func ScanJSONNumber(d []byte, i int) (end int, ok bool) {
	return number(d, i)
}

// SkipJSONValue validates the value at d[i:], nested depth objects and
// arrays deep, and returns the index after it. lone says a string in it has
// a lone surrogate escape; ok is false when it is not valid JSON, not valid
// UTF-8, or nests deeper than MaxJSONDepth.
func SkipJSONValue(d []byte, i, depth int) (end int, lone, ok bool) {
	s := scanner{depth: depth}
	end, ok = s.value(d, i, -1)
	return end, s.lone, ok
}

// PlainJSONBytes returns the index of the first byte of d from i on that a
// string scan must look at: a quote, a backslash, a control character or a
// byte of multi-byte UTF-8; len(d) when there is none. The bytes before it
// are a string's text as they are.
func PlainJSONBytes(d []byte, i int) int {
	for len(d)-i >= 8 {
		n := plainRun(binary.LittleEndian.Uint64(d[i:]))
		if i += n; n < 8 {
			return i
		}
	}
	for i < len(d) && !stringStop[d[i]] {
		i++
	}
	return i
}

// AppendJSONUnquoted appends the text of the body of a string that
// ScanJSONString accepted without a lone surrogate (the bytes between its
// quotes) to dst.
func AppendJSONUnquoted(dst, raw []byte) []byte {
	return appendUnquoted(dst, raw)
}
