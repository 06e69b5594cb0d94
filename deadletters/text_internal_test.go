package deadletters

import "testing"

func TestEscapeNonASCIIKeepsASCIIAndEscapesTheRest(t *testing.T) {
	for in, want := range map[string]string{
		`plain "quoted" text`: `plain "quoted" text`,
		"中 é \xff 😀":          `\u4E2D \u00E9 \xff \U0001F600`,
	} {
		if got := escapeNonASCII(in); got != want {
			t.Errorf("escapeNonASCII(%q) = %q, want %q", in, got, want)
		}
	}
}
