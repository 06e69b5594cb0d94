package decode

import (
	"strings"
	"testing"
)

func TestJSONNestedPastTheLimitIsTooDeepNotInvalid(t *testing.T) {
	deep := []byte(strings.Repeat("[", maxNestingDepth+1) + strings.Repeat("]", maxNestingDepth+1))
	if _, err := decodeJSON(deep); decodeKind(err) != KindTooDeep {
		t.Errorf("typed path: %d nested arrays: kind %q (%v), want %q", maxNestingDepth+1, decodeKind(err), err, KindTooDeep)
	}
	if kind, err := checkJSONSlow(deep); kind != KindTooDeep {
		t.Errorf("jsonb path: %d nested arrays: kind %q (%v), want %q", maxNestingDepth+1, kind, err, KindTooDeep)
	}
	if err := refusal(deep); decodeKind(err) != KindTooDeep {
		t.Errorf("the scanner's refusal: kind %q (%v), want %q", decodeKind(err), err, KindTooDeep)
	}

	broken := []byte(strings.Repeat("[", 10) + "}")
	if _, err := decodeJSON(broken); decodeKind(err) != KindInvalidJSON {
		t.Errorf("broken JSON: kind %q, want %q", decodeKind(err), KindInvalidJSON)
	}
	ok := []byte(strings.Repeat("[", maxNestingDepth) + strings.Repeat("]", maxNestingDepth))
	if _, err := decodeJSON(ok); err != nil {
		t.Errorf("%d levels, at the limit: %v", maxNestingDepth, err)
	}
}
