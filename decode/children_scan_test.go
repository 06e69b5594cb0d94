package decode

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzChildScanMatchesEncodingJSON holds scanMember and scanElements,
// which walk a child table's path, to what encoding/json reads of the
// same document: an object's member (the last of a repeated key), an
// array's elements, and whether the document is valid at all.
func FuzzChildScanMatchesEncodingJSON(f *testing.F) {
	for _, seed := range []string{`{"items":[{"sku":"a"}],"n":1}`, ` {"a":1,"a":[2]} `, `{"i\u0074ems":[1, 2 ,3]}`, `[1,{"a":[]},"x"]`,
		`[]`, `{}`, `{"a":}`, `[1,]`, `{"a":1} x`, `"items"`, `{"a":"\ud800"}`, `[[[[1]]]]`, `{"a":-01}`} {
		f.Add([]byte(seed), "a")
		f.Add([]byte(seed), "items")
	}
	f.Fuzz(func(t *testing.T, doc []byte, key string) {
		if !utf8.Valid(doc) {
			return // encoding/json takes it; the scanner refuses it, as the mapper does (stepError says so)
		}
		var obj map[string]json.RawMessage
		objErr := json.Unmarshal(doc, &obj)
		v, found, ok := scanMember(doc, key)
		wantOK := objErr == nil && obj != nil
		if ok != wantOK {
			t.Fatalf("scanMember(%q): ok %v; encoding/json: %v", doc, ok, objErr)
		}
		if ok {
			want, wantFound := obj[key]
			if found != wantFound || !bytes.Equal(v, want) {
				t.Fatalf("scanMember(%q, %q) = %q, %v; encoding/json: %q, %v", doc, key, v, found, want, wantFound)
			}
		}
		var arr []json.RawMessage
		arrErr := json.Unmarshal(doc, &arr)
		elems, ok := scanElements(doc)
		wantOK = arrErr == nil && arr != nil
		if ok != wantOK {
			t.Fatalf("scanElements(%q): ok %v; encoding/json: %v", doc, ok, arrErr)
		}
		if ok && len(elems) != len(arr) {
			t.Fatalf("scanElements(%q): %d elements, encoding/json %d", doc, len(elems), len(arr))
		}
		for i := range elems {
			if ok && !bytes.Equal(elems[i], arr[i]) {
				t.Fatalf("scanElements(%q): element %d %q, encoding/json %q", doc, i, elems[i], arr[i])
			}
		}
	})
}
