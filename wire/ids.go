package wire

import gonanoid "github.com/matoous/go-nanoid/v2"

// NewID returns a prefixed NanoID such as "rs_V1StGXR8_Z5jdHi6B-myT", the
// form the specification shows for ids ("msg_…", "conv_…").
func NewID(prefix string) string {
	// gonanoid.New only fails for a non-positive length.
	id, _ := gonanoid.New()
	if prefix == "" {
		return id
	}
	return prefix + "_" + id
}
