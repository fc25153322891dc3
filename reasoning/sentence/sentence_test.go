package sentence

import (
	"strings"
	"testing"
)

// Each case is text and the sentences it must split into, fed whole and
// token by token.
var corpus = []struct {
	text string
	want []string
}{
	{"Hello there. How are you?", []string{"Hello there.", "How are you?"}},
	{"It is 3.5 degrees. Cold!", []string{"It is 3.5 degrees.", "Cold!"}},
	{"Use e.g. a scarf. Or i.e. wool.", []string{"Use e.g. a scarf.", "Or i.e. wool."}},
	{"Dr. Smith is in. Mr. Jones is out.", []string{"Dr. Smith is in.", "Mr. Jones is out."}},
	{"See example.com/a.b for more. Thanks.", []string{"See example.com/a.b for more.", "Thanks."}},
	{"Wait... what happened? Nothing.", []string{"Wait... what happened?", "Nothing."}},
	{"I thought so... Then I left.", []string{"I thought so...", "Then I left."}},
	{"Steps:\n1. Open it.\n2. Close it.", []string{"Steps:\n1. Open it.", "2. Close it."}},
	{"Run `go test ./...` now. Done.", []string{"Run `go test ./...` now.", "Done."}},
	{"Code:\n```\nx = 1. y = 2.\n```\nThat is all.", []string{"Code:\n```\nx = 1. y = 2.\n```\nThat is all."}},
	{"He said \"stop.\" Then left.", []string{"He said \"stop.\"", "Then left."}},
	{"Really?! Yes.", []string{"Really?!", "Yes."}},
	{"J. R. R. Tolkien wrote it. Good book.", []string{"J. R. R. Tolkien wrote it.", "Good book."}},
	{"First paragraph without a stop\n\nSecond one.", []string{"First paragraph without a stop", "Second one."}},
	{"Version 1.2.3 is out. Update.", []string{"Version 1.2.3 is out.", "Update."}},
	{"It costs $4.99. Cheap.", []string{"It costs $4.99.", "Cheap."}},
	{"At 10 a.m. we meet. Be there.", []string{"At 10 a.m. we meet.", "Be there."}},
	{"This is **bold.** Next.", []string{"This is **bold.**", "Next."}},
	{"No terminator at the end", []string{"No terminator at the end"}},
	{"Tomorrow in Lyon: sunny, 24 °C. Enjoy!", []string{"Tomorrow in Lyon: sunny, 24 °C.", "Enjoy!"}},
}

func TestCorpus(t *testing.T) {
	all := append(corpus, moreCorpus...)
	if len(all) < 100 {
		t.Fatalf("the corpus has %d cases; keep it over 100", len(all))
	}
	for _, c := range all {
		for _, mode := range []string{"whole", "tokens"} {
			var sp Splitter
			var got []string
			if mode == "whole" {
				got = append(got, sp.Write(c.text)...)
			} else {
				for _, r := range c.text {
					got = append(got, sp.Write(string(r))...)
				}
			}
			got = append(got, sp.Flush()...)
			if strings.Join(got, "|") != strings.Join(c.want, "|") {
				t.Errorf("%s %q:\n got %q\nwant %q", mode, c.text, got, c.want)
			}
		}
	}
}

func TestRunOnTextIsCut(t *testing.T) {
	var sp Splitter
	text := strings.Repeat("and then it went on, ", 60)
	got := append(sp.Write(text), sp.Flush()...)
	if len(got) < 3 {
		t.Fatalf("%d pieces", len(got))
	}
	for _, s := range got {
		if len([]rune(s)) > MaxRunes {
			t.Fatalf("a piece of %d runes", len([]rune(s)))
		}
	}
	if strings.Join(got, " ") != strings.TrimSpace(text) {
		t.Fatal("text lost in cutting")
	}
}

func TestInspect(t *testing.T) {
	if s := Inspect("Run `ls` now."); !s.HasCode || s.HasEmphasis {
		t.Fatalf("%+v", s)
	}
	if s := Inspect("This is **important**."); s.HasCode || !s.HasEmphasis {
		t.Fatalf("%+v", s)
	}
}
