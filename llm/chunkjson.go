package llm

import gojson "github.com/goccy/go-json"

// decodeChunk decodes one streamed chunk, the one JSON decode a backend
// does per token. goccy/go-json decodes the same values as encoding/json
// (TestDecodeChunkMatchesEncodingJSON) in a quarter of the time: at 500
// streaming conversations encoding/json here was a sixth of the bot's CPU.
func decodeChunk(data []byte, v any) error {
	return gojson.Unmarshal(data, v)
}
