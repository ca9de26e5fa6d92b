package suggest

import "testing"

func TestClosest(t *testing.T) {
	cands := []string{"gsm8k", "swedev", "dr", "gen_chat"}
	for in, want := range map[string]string{"gsm8": "gsm8k", "GSM8K": "gsm8k", "swe-dev": "swedev", "genchat": "gen_chat", "zzzzzz": ""} {
		if got := Closest(in, cands); got != want {
			t.Errorf("Closest(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"", "abc", 3}, {"kitten", "sitting", 3}, {"flaw", "lawn", 2}, {"é", "e", 1}, {"abc", "abc", 0}} {
		if got := EditDistance(tc.a, tc.b); got != tc.d {
			t.Errorf("EditDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.d)
		}
		if got := EditDistance(tc.b, tc.a); got != tc.d {
			t.Errorf("EditDistance(%q, %q) = %d, want %d", tc.b, tc.a, got, tc.d)
		}
	}
}
