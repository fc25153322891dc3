package voice

import (
	"regexp"
	"strings"

	"github.com/alicia-voice/alicia/pipeline"
)

var (
	fence     = regexp.MustCompile("(?s)```.*?(```|$)")
	codeSpan  = regexp.MustCompile("`[^`]*`?")
	mdLink    = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	bareURL   = regexp.MustCompile(`(?i)\b(?:https?://|www\.)\S+`)
	emphasis  = regexp.MustCompile(`(\*\*|__|\*|_)(\S(?:.*?\S)?)(\*\*|__|\*|_)`)
	lineStart = regexp.MustCompile(`(?m)^\s*(?:#{1,6}\s+|[-*+]\s+|>\s*)`)
	quotes    = strings.NewReplacer(`"`, "", "“", "", "”", "", "«", "", "»", "")
)

// Speakable is what of a sentence is read aloud: code (flagged by the
// sentence splitter) is skipped, emphasis markers stripped, links read by
// their text and bare URLs left out, as LiveKit Agents' markdown filter
// does, and double quotation marks dropped. An empty result means there is nothing to say.
func Speakable(s pipeline.Sentence) string {
	t := s.Text
	if s.HasCode() {
		t = fence.ReplaceAllString(t, " ")
		t = codeSpan.ReplaceAllString(t, " ")
	}
	t = mdLink.ReplaceAllString(t, "$1")
	t = bareURL.ReplaceAllString(t, " ")
	if s.HasEmphasis() {
		t = emphasis.ReplaceAllString(t, "$2")
	}
	t = lineStart.ReplaceAllString(t, "")
	// Quotation marks are never read aloud, and espeak-ng ends a sentence
	// closed by '".' with a pitch contour recognisers stumble on.
	t = quotes.Replace(t)
	t = strings.Join(strings.Fields(t), " ")
	if strings.Trim(t, ".,;:!?-–—()\"' ") == "" {
		return ""
	}
	return t
}
