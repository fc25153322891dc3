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
// s, or 0 when no sentence is complete yet. Unless final is set, an end
// is reported only once no further text can move or remove it, so that
// the sentences are the same however the text is cut into chunks.
func End(s string, final bool) int {
	end, _ := scan(s, final)
	return end
}

// scan returns the first sentence end in s, or 0 and the smallest offset
// at which an end may still be found once more text arrives (len(s) when
// nothing in s waits for it).
//
// What more text can change, and so what waits for it:
//   - a terminator at the very end: a dot may be a decimal point (3.5),
//     part of an abbreviation (e.g, U.S), a URL (example.com) or the start
//     of an ellipsis, and any terminator may be followed by more of them
//     ("?!") or by a closing quote or bracket that belongs to the sentence;
//     a backend may send the dot alone, so the next character decides;
//   - after an ellipsis or a closing mark ('done.' or not), the case of
//     the next word, so the text waits until a non-space character comes;
//   - a line break at the very end (a paragraph break may follow), or a
//     new line whose list marker ("2. ", "- ") is not complete yet.
//
// A plain terminator followed by a space is decided there: what keeps it
// inside a sentence (an abbreviation, an initial, a list number) comes
// before it, so "Hello world. " goes out without waiting for the next
// word; a lower-case word after it does not join it (nor did it when the
// dot came as a token of its own, which is how models send it).
func scan(s string, final bool) (end, undecided int) {
	inCode := false
	fence := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		ellipsis := 0
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
		case c == '\n':
			if i+1 == len(s) && !final {
				return 0, i
			}
			if i+1 < len(s) && s[i+1] == '\n' && strings.TrimSpace(s[:i]) != "" {
				return i, 0
			}
			continue
		case strings.HasPrefix(s[i:], "..."):
			ellipsis = 3
		case strings.HasPrefix(s[i:], "…"):
			c, ellipsis = '.', len("…")
		case c != '.' && c != '!' && c != '?':
			continue
		}
		j := i + max(1, ellipsis)
		for j < len(s) && strings.IndexByte(`.!?"')]*_`, s[j]) >= 0 {
			j++
		}
		if r, size := utf8.DecodeRuneInString(s[j:]); r == '”' || r == '’' || r == '»' {
			j += size
		}
		if j >= len(s) || !utf8.FullRuneInString(s[j:]) {
			if final {
				return len(s), 0
			}
			return 0, i
		}
		if next, _ := utf8.DecodeRuneInString(s[j:]); !unicode.IsSpace(next) {
			continue // 3.5, e.g.x, example.com/a.b
		}
		if c == '.' && (isAbbreviation(s[:i]) || isListMarker(s[:i]) || isNumbered(s[:i])) {
			continue
		}
		if c != '.' || j-i == 1 {
			return j, 0
		}
		// An ellipsis or a closing mark: the next word decides.
		rest := strings.TrimLeftFunc(s[j:], unicode.IsSpace)
		if rest == "" || !utf8.FullRuneInString(rest) {
			if final {
				return j, 0
			}
			return 0, i
		}
		item, known := lineItem(s[j:], final)
		switch {
		case !known:
			return 0, i
		case item:
			return j, 0
		case j-i < 3 && startsLower(rest):
			continue // sentences start with a capital: "'done.' or not"
		case j-i < 3:
			return j, 0
		}
		if rest == "I" && !final {
			return 0, i // "I think" or "In short"
		}
		if startsLower(rest) || startsWithI(rest) {
			i = j - 1
			continue // an ellipsis inside a sentence... like this
		}
		return j, 0
	}
	return 0, len(s)
}

// lineItem reports a new line that starts a list item, and known false
// while its marker may still be arriving ("\n2" before "\n2. ").
func lineItem(s string, final bool) (item, known bool) {
	if nextLineIsItem(s) {
		return true, true
	}
	// A marker and its space fit in five bytes ("123. ").
	if final || len(strings.TrimLeftFunc(s, unicode.IsSpace)) >= 5 || !strings.Contains(s, "\n") {
		return false, true
	}
	for _, more := range []string{" ", ". ", ") "} {
		if nextLineIsItem(s + more) {
			return false, false
		}
	}
	return false, true
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
		// The first MaxRunes runes are cut the same way whether the end
		// beyond them is known yet or not.
		end, undecided := scan(s, final)
		if end > 0 && overLong(s[:end]) || end == 0 && overLong(s[:undecided]) {
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

func overLong(s string) bool {
	return len(s) > MaxRunes && utf8.RuneCountInString(s) > MaxRunes
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
