package sentence

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// Each case is text and the sentences it must split into, fed whole,
// token by token and rune by rune.
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

// qwenPieces cuts text where Qwen3's tokenizer may end a token: its
// pre-tokenizer pattern (a token never spans two of these pieces, and a
// piece is usually one token). Letters keep one leading non-letter (" word",
// ".com"), digits stand alone, punctuation runs stay together ("...",
// "?!", ".\"").
var qwenPieces = regexp.MustCompile(`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\pL\pN]?\pL+|\pN| ?[^\s\pL\pN]+[\r\n]*|\s*[\r\n]+|\s+`)

func split(text, mode string) []string {
	var sp Splitter
	var got []string
	switch mode {
	case "whole":
		got = append(got, sp.Write(text)...)
	case "tokens":
		for _, tok := range qwenPieces.FindAllString(text, -1) {
			got = append(got, sp.Write(tok)...)
		}
	case "runes":
		for _, r := range text {
			got = append(got, sp.Write(string(r))...)
		}
	}
	return append(got, sp.Flush()...)
}

func TestCorpus(t *testing.T) {
	all := append(corpus, moreCorpus...)
	if len(all) < 100 {
		t.Fatalf("the corpus has %d cases; keep it over 100", len(all))
	}
	for _, c := range all {
		if strings.Join(qwenPieces.FindAllString(c.text, -1), "") != c.text {
			t.Fatalf("the token pattern loses text of %q", c.text)
		}
		for _, mode := range []string{"whole", "tokens", "runes"} {
			if got := split(c.text, mode); strings.Join(got, "|") != strings.Join(c.want, "|") {
				t.Errorf("%s %q:\n got %q\nwant %q", mode, c.text, got, c.want)
			}
		}
	}
}

// The sentence goes out with the chunk that decides its end: a space
// after the terminator, or the next word where its case decides, never
// the terminator alone, as the next character may change its meaning
// (3.5, e.g, example.com, "?!").
func TestSentenceGoesOutOnTheChunkThatDecidesIt(t *testing.T) {
	for _, c := range []struct {
		tokens []string
		// at[k] is the sentence Write must return for tokens[k], "" for none.
		at []string
	}{
		{[]string{"Hello", " there", ".", " How", " are", " you", "?", " Bye"}, []string{"", "", "", "Hello there.", "", "", "", "How are you?"}},
		{[]string{"Hello world. ", "How"}, []string{"Hello world.", ""}},
		{[]string{"Sunny", " in", " Lyon", "!", " Enjoy"}, []string{"", "", "", "", "Sunny in Lyon!"}},
		{[]string{"Really", "?", "!", " Yes"}, []string{"", "", "", "Really?!"}},
		{[]string{"Stop", "!", "Now", ".", " Ok"}, []string{"", "", "", "", "Stop!Now."}},
		{[]string{"See", " https", "://", "example", ".", "com", "/docs", ".", " Ok"}, []string{"", "", "", "", "", "", "", "", "See https://example.com/docs."}},
		// A digit: 42.5 may follow.
		{[]string{"It", " is", " 4", "2", ".", "5", " now", ".", " Ok"}, []string{"", "", "", "", "", "", "", "", "It is 42.5 now."}},
		{[]string{"It", " is", " 4", "2", ".", " Ok"}, []string{"", "", "", "", "", "It is 42."}},
		{[]string{"It costs 3.", "5 dollars. ", "Then"}, []string{"", "It costs 3.5 dollars.", ""}},
		// An abbreviation, an initial: e.g, U.S may follow the dot.
		{[]string{"That is a good start, e.", "g. Qwen3-4B in 4-bit form.", " Then"}, []string{"", "", "That is a good start, e.g. Qwen3-4B in 4-bit form."}},
		{[]string{"The U.", "S. economy grew. ", "It"}, []string{"", "The U.S. economy grew.", ""}},
		{[]string{"Ask", " Dr", ".", " Smith", ".", " Ok"}, []string{"", "", "", "", "", "Ask Dr. Smith."}},
		{[]string{"J", ".", " Smith", " wrote", ".", " Ok"}, []string{"", "", "", "", "", "J. Smith wrote."}},
		// An ellipsis: the sentence may go on.
		{[]string{"Well", "...", " I", " think", " so", ".", " Ok"}, []string{"", "", "", "", "", "", "Well... I think so."}},
		{[]string{"Well", ".", ".", ".", " ", "I", "n", " short", "."}, []string{"", "", "", "", "", "", "Well...", "", ""}},
		{[]string{"And", " then", "...", " Silence", ".", " Ok"}, []string{"", "", "", "And then...", "", "Silence."}},
		// Closing quotes and emphasis: 'done.' or not.
		{[]string{"Is", " it", " '", "done", ".'", " or", " not", "?", " Ok"}, []string{"", "", "", "", "", "", "", "", "Is it 'done.' or not?"}},
		{[]string{"He", " said", " \"", "stop", ".", "\"", " Then"}, []string{"", "", "", "", "", "", "He said \"stop.\""}},
		// A question inside a quote: its closing mark may come next.
		{[]string{"You", " said", ":", " \"", "Why", "?", "\".", " I"}, []string{"", "", "", "", "", "", "", "You said: \"Why?\"."}},
		{[]string{"(", "Really", "?", ")", " Yes"}, []string{"", "", "", "", "(Really?)"}},
		// A blank line, a list marker still arriving.
		{[]string{"No stop", "\n", "\n", "Next"}, []string{"", "", "No stop", ""}},
		{[]string{"Options", ":", " \"", "a", ".\"", "\n", "b", ".", " Tea"}, []string{"", "", "", "", "", "", "", "", "Options: \"a.\""}},
	} {
		var sp Splitter
		for k, tok := range c.tokens {
			got := strings.Join(sp.Write(tok), "|")
			if got != c.at[k] {
				t.Fatalf("%q: after token %d %q got %q, want %q", c.tokens, k, tok, got, c.at[k])
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

func noSpace(s string) string { return strings.Join(strings.Fields(s), "") }

// BenchmarkSentenceDelay streams an answer at a model's pace and reports
// how long after the token that ends a sentence the sentence is out: one
// token's time, as the token after a terminator decides it.
//
//	go test -run '^$' -bench SentenceDelay -benchtime 3x ./reasoning/sentence
func BenchmarkSentenceDelay(b *testing.B) {
	answer := "Tomorrow in Lyon: sunny, 24 °C. Take a hat! Do you need anything else? The forecast is from this morning."
	tokens := qwenPieces.FindAllString(answer, -1)
	for _, rate := range []int{25, 100} {
		b.Run(fmt.Sprintf("%dtok/s", rate), func(b *testing.B) {
			var delays []time.Duration
			for range b.N {
				var sp Splitter
				tick := time.NewTicker(time.Second / time.Duration(rate))
				var pendingEnd time.Time // when the token that ended a sentence arrived
				for _, tok := range tokens {
					<-tick.C
					arrived := time.Now()
					if pendingEnd.IsZero() && strings.ContainsAny(tok, ".!?") {
						pendingEnd = arrived
					}
					if out := sp.Write(tok); len(out) > 0 && !pendingEnd.IsZero() {
						delays = append(delays, time.Since(pendingEnd))
						pendingEnd = time.Time{}
					}
				}
				tick.Stop()
				sp.Flush()
			}
			slices.Sort(delays)
			b.ReportMetric(float64(delays[len(delays)/2].Microseconds())/1000, "delay-p50-ms")
			b.ReportMetric(float64(delays[len(delays)-1].Microseconds())/1000, "delay-max-ms")
		})
	}
}
