package pipeline

// Attach makes s the conversation's speech: it is handed every turn
// started from now on, typed or spoken, from whichever face. A later
// Attach replaces it; the returned func detaches it.
func (c *Conversation) Attach(s Speaker) (detach func()) {
	c.mu.Lock()
	c.attached++
	n := c.attached
	c.speaker = s
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		if c.attached == n {
			c.speaker = nil
		}
		c.mu.Unlock()
	}
}

// makeLatest makes t the conversation's latest turn and hands it to the
// speaker, if one listens: a turn started and a held turn used alike.
// Called on the run goroutine.
func (c *Conversation) makeLatest(t *Turn) {
	c.last = t
	c.mu.Lock()
	speaker := c.speaker
	c.mu.Unlock()
	if speaker != nil {
		speaker.Speak(t)
	}
}
