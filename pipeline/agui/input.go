package agui

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/alicia-voice/alicia/llm"
	"github.com/alicia-voice/alicia/wire"
)

// readRun reads and checks the request's RunAgentInput, and its messages
// as the model's conversation.
func readRun(w http.ResponseWriter, r *http.Request) (*runInput, []llm.Message, error) {
	var in runInput
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<20)).Decode(&in); err != nil {
		return nil, nil, errors.New("the body is not a RunAgentInput: " + err.Error())
	}
	if in.ThreadID == nil || in.RunID == nil || in.Messages == nil {
		return nil, nil, errors.New("RunAgentInput needs threadId, runId and messages")
	}
	if *in.ThreadID == "" || *in.RunID == "" {
		return nil, nil, errors.New("threadId and runId must not be empty")
	}
	messages, err := toLLM(*in.Messages)
	if err != nil {
		return nil, nil, err
	}
	if len(messages) == 0 || messages[len(messages)-1].Role == llm.RoleAssistant {
		return nil, nil, errors.New("messages must end with a user or tool message")
	}
	return &in, messages, nil
}

// clientTools are the tools the run offers the model.
func clientTools(in []inputTool) ([]wire.ClientTool, error) {
	var tools []wire.ClientTool
	for _, t := range in {
		if t.Name == "" {
			return nil, errors.New("every tool needs a name")
		}
		var params map[string]any
		if len(t.Parameters) > 0 && json.Unmarshal(t.Parameters, &params) != nil {
			return nil, errors.New("tool " + t.Name + ": parameters must be a JSON Schema object")
		}
		tools = append(tools, wire.ClientTool{Name: t.Name, Description: t.Description, Parameters: params})
	}
	return tools, nil
}

// lastQuestion is the run's last user message, or a new id for a run
// that ends with tool results.
func lastQuestion(thread string, messages []llm.Message) *wire.UserMessage {
	user := &wire.UserMessage{ConversationID: thread}
	for i := len(messages) - 1; i >= 0; i-- {
		if m := messages[i]; m.Role == llm.RoleUser {
			user.ID, user.Content = m.ID, m.Content
			break
		}
	}
	if user.ID == "" {
		user.ID = wire.NewID("msg")
	}
	return user
}
