package wire

import "testing"

func benchEnvelopes() map[string]*Envelope {
	return map[string]*Envelope{
		"ReasoningStep": {StanzaID: -42, ConversationID: "conv_Yt2xQ9mB7LkP0aZr4sWc1", Body: &ReasoningStep{
			ID: "rs_4kQmW8nB2vC6xZ0lK3jH5", ConversationID: "conv_Yt2xQ9mB7LkP0aZr4sWc1", PreviousID: "msg_p9LzT4qW2eR8yU1iO0aS3",
			Content:   "The user asks for tomorrow's weather in Lyon. I should call the forecast tool with the city and one day, then answer in Celsius since the user is in France.",
			StepIndex: 3,
		}},
		"AssistantSentence": {StanzaID: -43, ConversationID: "conv_Yt2xQ9mB7LkP0aZr4sWc1", Body: &AssistantSentence{
			ID: "as_Hj7Kl8Zx9Cv0Bn1Mq2We3", PreviousID: "am_Q1wE2rT3yU4iO5pA6sD7f", ConversationID: "conv_Yt2xQ9mB7LkP0aZr4sWc1",
			Sequence: 2, Text: "Tomorrow in Lyon will be sunny, with a high of 24 °C and a light breeze from the north.",
		}},
	}
}

func BenchmarkMarshal(b *testing.B) {
	for name, env := range benchEnvelopes() {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, 0, 512)
			for b.Loop() {
				if _, err := AppendMarshal(buf[:0], env); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkUnmarshal(b *testing.B) {
	for name, env := range benchEnvelopes() {
		data, err := Marshal(env)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := Unmarshal(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
