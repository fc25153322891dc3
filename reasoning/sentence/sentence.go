// Package sentence finds where sentences end in streamed text, well
// enough to speak them: not at decimal points, common abbreviations,
// initials, ellipses inside a sentence, URLs or numbered-list markers, and
// never inside a code span or fence.
package sentence

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

var abbreviations = []string{"e.g", "i.e", "etc", "vs", "mr", "mrs", "ms", "dr", "prof", "st", "no", "approx", "cf", "fig", "jr", "sr", "inc", "ltd", "u.s", "a.m", "p.m"}

// End returns the byte offset just after the first complete sentence in
// s, or 0 when no sentence is complete yet. A terminator at the very end
// of s is not a boundary until what follows is known (more text may
// come), unless final is set.
func End(s string, final bool) int {
	inCode := false
	fence := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case strings.HasPrefix(s[i:], "```"):
			fence = !fence
			i += 2
			continue
		case c == '`' && !fence:
			inCode = !inCode
			continue
		case fence || inCode:
			continue
		case c == '\n' && i+1 < len(s) && s[i+1] == '\n':
			if strings.TrimSpace(s[:i]) != "" {
				return i
			}
			continue
		case c != '.' && c != '!' && c != '?':
			continue
		}
		j := i + 1
		if c == '.' && strings.HasPrefix(s[i:], "...") {
			j = i + 3
		}
		for j < len(s) && strings.IndexByte(`.!?"')]*_`, s[j]) >= 0 {
			j++
		}
		if r, size := utf8.DecodeRuneInString(s[j:]); r == '”' || r == '’' || r == '»' {
			j += size
		}
		if j >= len(s) {
			if final || endsOnItsToken(s, i, j) {
				return len(s)
			}
			return 0 // the next token decides
		}
		if next, _ := utf8.DecodeRuneInString(s[j:]); !unicode.IsSpace(next) {
			continue // 3.5, e.g.x, example.com/a.b
		}
		if strings.TrimSpace(s[j:]) == "" && !final && !endsOnItsToken(s, i, j) {
			return 0 // the next word decides
		}
		if c == '.' && (isAbbreviation(s[:i]) || isListMarker(s[:i]) || isNumbered(s[:i])) {
			continue
		}
		if nextLineIsItem(s[j:]) {
			return j
		}
		if c == '.' && j-i < 3 && startsLower(s[j:]) {
			continue // sentences start with a capital: "'done.' or not"
		}
		if c == '.' && j-i >= 3 && strings.TrimSpace(s[j:]) == "" && !final {
			return 0 // whether the sentence goes on after the ellipsis is not known yet
		}
		if c == '.' && j-i >= 3 && (startsLower(s[j:]) || startsWithI(s[j:])) {
			i = j - 1
			continue // an ellipsis inside a sentence... like this
		}
		return j
	}
	// The multi-byte ellipsis.
	if k := strings.Index(s, "…"); k >= 0 && k+len("…") < len(s) {
		rest := s[k+len("…"):]
		if strings.TrimSpace(rest) == "" && !final {
			return 0
		}
		if r, _ := utf8.DecodeRuneInString(rest); unicode.IsSpace(r) && !startsLower(rest) && !startsWithI(rest) {
			return k + len("…")
		}
	}
	return 0
}

// endsOnItsToken reports a terminator run s[i:j] that ends a sentence
// whatever comes next, so that the sentence goes out on the token that
// ends it. A model's tokenizer keeps a run of punctuation in one token and
// glues a dot to the letters after it (".com", ".yaml"), so a lone
// terminator after a word is the end of that word. Held back are the
// cases the next token decides: a dot after a digit (3.5), an
// abbreviation, an initial or a list marker (the next word's case), a
// possible ellipsis, and closing quotes or brackets ('done.' or not).
func endsOnItsToken(s string, i, j int) bool {
	run := s[i:j]
	if strings.Trim(run, ".!?") != "" || insideQuote(s[:i]) {
		return false // quotes, brackets or emphasis: the next word decides
	}
	if s[i] != '.' {
		return true
	}
	if len(run) > 1 || i == 0 {
		return false
	}
	prev, _ := utf8.DecodeLastRuneInString(s[:i])
	if unicode.IsDigit(prev) || !unicode.IsLetter(prev) && !unicode.IsPunct(prev) && !unicode.IsSymbol(prev) {
		return false
	}
	before := s[:i]
	return !isAbbreviation(before) && !isListMarker(before) && !isNumbered(before) && !startsTerminatorRun(before)
}

// insideQuote: a quotation or bracket opened before the terminator is
// still open, so its closing mark may be the next token (`said "Hi?` + `"`).
// Single quotes are left out: they are apostrophes as often as not.
func insideQuote(before string) bool {
	return strings.Count(before, `"`)%2 == 1 ||
		strings.Count(before, "“") > strings.Count(before, "”") ||
		strings.Count(before, "(") > strings.Count(before, ")")
}

// startsTerminatorRun: the dot follows "!" or "?" (a "?." typo) or another
// dot already held: part of one run, decided with it.
func startsTerminatorRun(before string) bool {
	return strings.HasSuffix(before, ".") || strings.HasSuffix(before, "!") || strings.HasSuffix(before, "?")
}

// nextLineIsItem: a new line that starts a list item ("b. ", "2) ",
// "- ") starts a sentence, whatever its case.
func nextLineIsItem(s string) bool {
	ws := len(s) - len(strings.TrimLeftFunc(s, unicode.IsSpace))
	if !strings.Contains(s[:ws], "\n") {
		return false
	}
	rest := s[ws:]
	if strings.HasPrefix(rest, "- ") || strings.HasPrefix(rest, "* ") {
		return true
	}
	k := strings.IndexAny(rest, ".)")
	return k > 0 && k <= 3 && k+1 < len(rest) && rest[k+1] == ' ' && isListMarker(rest[:k])
}

// startsWithI: "Well... I think" goes on; the pronoun is a capital
// that does not start a sentence.
func startsWithI(s string) bool {
	s = strings.TrimLeftFunc(s, unicode.IsSpace)
	return s == "I" || strings.HasPrefix(s, "I ") || strings.HasPrefix(s, "I'")
}

var numberedWords = []string{"step", "chapter", "part", "item", "page", "rule", "section", "phase", "level", "round"}

// isNumbered: "Step 1." or "Chapter 12." names a thing, it does not end a
// sentence.
func isNumbered(before string) bool {
	fields := strings.Fields(before)
	if len(fields) < 2 {
		return false
	}
	num, word := fields[len(fields)-1], strings.ToLower(fields[len(fields)-2])
	for _, r := range num {
		if !unicode.IsDigit(r) {
			return false
		}
	}
	return len(num) <= 3 && slices.Contains(numberedWords, word)
}

func startsLower(s string) bool {
	s = strings.TrimLeftFunc(s, unicode.IsSpace)
	r, _ := utf8.DecodeRuneInString(s)
	return unicode.IsLower(r)
}

func isAbbreviation(before string) bool {
	w := before[strings.LastIndexFunc(before, unicode.IsSpace)+1:]
	w = strings.ToLower(strings.TrimLeft(w, `("'*_`))
	if utf8.RuneCountInString(w) == 1 && unicode.IsUpper([]rune(before[len(before)-len(w):])[0]) {
		return true // an initial: "J. Smith" (not a unit: "3.5 m.")
	}
	return slices.Contains(abbreviations, w)
}

// isListMarker: "1." or "a." at the start of a line.
func isListMarker(before string) bool {
	line := before[strings.LastIndexByte(before, '\n')+1:]
	line = strings.TrimSpace(line)
	if line == "" || len(line) > 3 {
		return false
	}
	for _, r := range line {
		if !unicode.IsDigit(r) && !(len(line) == 1 && unicode.IsLetter(r)) {
			return false
		}
	}
	return true
}

// MaxRunes bounds a sentence before it is cut at a clause or word
// boundary, so that run-on text is still spoken in reasonable pieces.
const MaxRunes = 300

// Splitter turns streamed text into sentences as soon as each is complete.
type Splitter struct {
	buf strings.Builder
}

// Write adds text and returns the sentences it completed.
func (sp *Splitter) Write(text string) []string {
	sp.buf.WriteString(text)
	return sp.take(false)
}

// Flush returns what remains as the last sentence.
func (sp *Splitter) Flush() []string {
	return sp.take(true)
}

func (sp *Splitter) take(final bool) []string {
	var out []string
	s := sp.buf.String()
	for {
		end := End(s, false)
		if end == 0 && utf8.RuneCountInString(s) > MaxRunes {
			end = longCut(s)
		}
		if end == 0 {
			break
		}
		if t := strings.TrimSpace(s[:end]); t != "" {
			out = append(out, t)
		}
		s = s[end:]
	}
	if final {
		if t := strings.TrimSpace(s); t != "" {
			out = append(out, t)
		}
		s = ""
	}
	sp.buf.Reset()
	sp.buf.WriteString(s)
	return out
}

// longCut cuts run-on text after a clause (;, :, a comma) or else a word,
// past half of MaxRunes.
func longCut(s string) int {
	limit := byteOffset(s, MaxRunes)
	half := byteOffset(s, MaxRunes/2)
	for _, sep := range []string{"; ", ": ", ", ", " — ", " "} {
		if i := strings.LastIndex(s[:limit], sep); i >= half {
			return i + len(sep)
		}
	}
	return limit
}

func byteOffset(s string, runes int) int {
	i := 0
	for range runes {
		if i >= len(s) {
			return len(s)
		}
		_, n := utf8.DecodeRuneInString(s[i:])
		i += n
	}
	return i
}

// Speech marks what a sentence holds that must not be read aloud: code
// (fences or spans) and emphasis markers. The text itself is kept.
type Speech struct {
	HasCode     bool
	HasEmphasis bool
}

// Inspect reports the markdown a speech stage must skip or strip.
func Inspect(s string) Speech {
	return Speech{
		HasCode:     strings.Contains(s, "`"),
		HasEmphasis: strings.Contains(s, "**") || strings.Contains(s, "__") || emphasisStar(s),
	}
}

func emphasisStar(s string) bool {
	i := strings.IndexByte(s, '*')
	return i >= 0 && i+1 < len(s) && s[i+1] != ' ' && strings.IndexByte(s[i+1:], '*') > 0
}
