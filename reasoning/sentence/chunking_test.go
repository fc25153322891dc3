package sentence

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// edgeTexts are cut at places where a chunk boundary used to decide the
// sentences, with no fixed expectation beyond the whole text's.
var edgeTexts = []string{
	"That is a good start, e.g. Qwen3-4B in 4-bit form. Then tune it.",
	"Hello world. and more",
	"Oh… Right. Yes.",
	"Well... Imagine that. Well... I see. Well... It's fine.",
	"Wait...\n- one.\n- two.",
	`Is it "done."` + "\nb. Coffee.\nc. tea.",
	"Stop!Now. Stop! Now. Stop!! Now?! Yes.",
	"See ``` fence. x. ``` and `a. b` here. Done.",
	"Para one\n\n\n\nPara two.\n \nPara three.",
	"Go to 1.\n2. Next.\n10) Ten.\n* Star.",
	"He said “good night.” She left. (Really?) Yes. [Fine.] Ok.",
	"Ünïcödé é. Ça va… très bien. 🎉! Done.",
	// Longer than MaxRunes before the first end, with ends just under,
	// at and past the limit.
	strings.Repeat("and then it went on, ", 60),
	strings.Repeat("and then it went on, ", 16) + "done. Next.",
	strings.Repeat("word ", 59) + "e.g. more words here. Next.",
	strings.Repeat("word ", 59) + "ab. Next one.",
	strings.Repeat("wörd ", 59) + "3.5 then. Next.",
	strings.Repeat("x", 320) + ". Next.",
}

// TestChunkingDoesNotChangeSentences: a backend or proxy may cut the text
// anywhere (vLLM sent "e." and "g. Qwen3-4B" apart), so the sentences must
// be those of the whole text however it arrives.
func TestChunkingDoesNotChangeSentences(t *testing.T) {
	var texts []string
	for _, c := range append(corpus, moreCorpus...) {
		texts = append(texts, c.text)
	}
	texts = append(texts, edgeTexts...)
	for n, text := range texts {
		want := splitChunks([]string{text})
		check := func(how string, chunks []string) bool {
			t.Helper()
			if strings.Join(chunks, "") != text {
				t.Fatalf("%s: the cutting of %q loses text", how, text)
			}
			got := splitChunks(chunks)
			if strings.Join(got, "|") == strings.Join(want, "|") && noSpace(strings.Join(got, "")) == noSpace(text) {
				return true
			}
			t.Errorf("%s %q:\n got %q\nwant %q", how, chunks, got, want)
			return false
		}
		if noSpace(strings.Join(want, "")) != noSpace(text) {
			t.Errorf("whole %q: got %q", text, want)
		}
		for k := 1; k < len(text); k++ {
			if utf8.RuneStart(text[k]) && !check("two chunks", []string{text[:k], text[k:]}) {
				break
			}
		}
		var runes []string
		for _, r := range text {
			runes = append(runes, string(r))
		}
		check("runes", runes)
		rng := rand.New(rand.NewPCG(1, uint64(n)))
		for range 200 {
			if !check("random", randomChunks(rng, text)) {
				break
			}
		}
	}
}

func splitChunks(chunks []string) []string {
	var sp Splitter
	var got []string
	for _, c := range chunks {
		got = append(got, sp.Write(c)...)
	}
	return append(got, sp.Flush()...)
}

// randomChunks cuts text into pieces of 1 to 12 bytes, runes kept whole
// as the LLM client yields them.
func randomChunks(rng *rand.Rand, text string) []string {
	var chunks []string
	for len(text) > 0 {
		k := min(1+rng.IntN(12), len(text))
		for k < len(text) && !utf8.RuneStart(text[k]) {
			k++
		}
		chunks = append(chunks, text[:k])
		text = text[k:]
	}
	return chunks
}

// BenchmarkSplitterTokens measures the CPU cost of splitting the corpus
// fed token by token, as the pipeline does on every delta.
func BenchmarkSplitterTokens(b *testing.B) {
	var tokens [][]string
	for _, c := range append(corpus, moreCorpus...) {
		tokens = append(tokens, qwenPieces.FindAllString(c.text, -1))
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, toks := range tokens {
			splitChunks(toks)
		}
	}
}
