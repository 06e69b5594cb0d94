package sinks

import (
	"strings"
	"testing"
)

func TestNameTemplatesTakeTheTopicsParts(t *testing.T) {
	const dbz = `shop\.(?P<schema>[^.]+)\.(?P<table>.+)`
	cases := []struct {
		name, template, topic, regex, want string
	}{
		{"the sanitized topic", "${topic}", "shop.public.customers", "", "shop_public_customers"},
		{"a part from the start", "${topic.3}", "shop.public.customers", "", "customers"},
		{"the last part", "${topic.-1}", "shop.public.customers", "", "customers"},
		{"the first part from the end", "${topic.-3}", "shop.public.customers", "", "shop"},
		{"parts and text", "${topic.2}_${topic.3}_v1", "shop.public.customers", "", "public_customers_v1"},
		{"a named group", "${table}", "shop.public.customers", dbz, "customers"},
		{"two named groups", "${schema}__${table}", "shop.inventory.orders", dbz, "inventory__orders"},
		{"a part keeps its case and punctuation", "${topic.3}", "shop.public.Order-Items", "", "Order-Items"},
		{"a group keeps them too", "${table}", "shop.public.Order-Items", dbz, "Order-Items"},
		{"plain text", "orders", "shop.public.customers", "", "orders"},
		{"a lone dollar is text", "a$b", "t", "", "a$b"},
		{"a group that matched nothing is empty", "x${g}", "ab", `a(?P<g>c)?b`, "x"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := route(c.template, c.topic, c.regex)
			if err != nil || got != c.want {
				t.Errorf("%q for topic %q = %q, %v; want %q", c.template, c.topic, got, err, c.want)
			}
		})
	}
}

func TestNameTemplatesThatCannotNameATableSayWhy(t *testing.T) {
	long := strings.Repeat("x", 64)
	cases := []struct {
		name, template, topic, regex string
		want                         []string
	}{
		{"part zero", "${topic.0}", "a.b", "", []string{`${topic.0} names no part`, "count from 1"}},
		{"a part that is not a number", "${topic.x}", "a.b", "", []string{`${topic.x} names no part`}},
		{"a part the topic lacks", "${topic.4}", "shop.public.customers", "", []string{`topic "shop.public.customers" has 3 dot-separated part(s)`, "${topic.4}", "${topic.-1}"}},
		{"a part from the end the topic lacks", "${topic.-4}", "a.b", "", []string{`topic "a.b" has 2`}},
		{"an unknown group", "${tabel}", "shop.public.customers", `shop\.(?P<table>.+)`, []string{"${tabel}", "named group of topic_regex (it has table)", "(?P<tabel>...)"}},
		{"a group without topic_regex", "${table}", "shop.public.customers", "", []string{"${table} is not ${topic}, ${topic.N}", "topic_regex"}},
		{"the whole value", "${value}", "t", "", []string{"${value} names no field", "${value.FIELD}"}},
		{"a header without its key", "${header.}", "t", "", []string{"${header.} names no field", "${header.KEY}"}},
		{"a value path that does not parse", "${value.a[x]}", "t", "", []string{"${value.a[x]}", "not an array index"}},
		{"an unclosed reference", "${topic.2", "a.b", "", []string{"without its }"}},
		{"an empty part", "${topic.2}", "a..b", "", []string{`gives "" for topic "a..b"`, "table is empty"}},
		{"a name too long", "${topic.2}", "a." + long, "", []string{`for topic "a.` + long + `"`, "64 bytes long", "63"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := route(c.template, c.topic, c.regex)
			if err == nil {
				t.Fatalf("%q for topic %q = %q, want an error", c.template, c.topic, got)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func route(template, topic, regex string) (string, error) {
	if regex == "" {
		return routeName("table", template, topic, nil, nil)
	}
	re, err := sinkRegex(regex)
	if err != nil {
		return "", err
	}
	return routeName("table", template, topic, re, groupNames(regex))
}

// A topic_regex sink is checked at start with a topic its regex matches,
// so that its templates meet a topic of the shape they expect.
func TestTopicLikeMatchesTheRegex(t *testing.T) {
	for _, c := range []struct{ regex, want string }{
		{`shop\.public\..*`, "shop.public.x"},
		{`shop\.(?P<schema>[^.]+)\.(?P<table>.+)`, ""},
		{`orders|payments`, "orders"},
		{`t[0-9]{3}`, "t000"},
		{`(a|b)+\.c?d*`, ""},
		{`x\z`, "x"},
		{`[^\x00-\x{10FFFF}]`, "probe"}, // matches nothing
	} {
		re, err := sinkRegex(c.regex)
		if err != nil {
			t.Fatal(err)
		}
		got := topicLike(c.regex, re)
		if c.want != "" && got != c.want {
			t.Errorf("topicLike(%q) = %q, want %q", c.regex, got, c.want)
		}
		if got != "probe" && !re.MatchString(got) {
			t.Errorf("topicLike(%q) = %q, which it does not match", c.regex, got)
		}
	}
}
