package storage

import "strings"

// historyChannel announces, at each commit, the conversations whose
// messages or steps a process wrote: "origin conversation".
const historyChannel = "alicia_history"

// histSeenMax bounds the conversations remembered as announced; past it
// they are forgotten together and every version moves on (each open
// conversation's history is read once more).
const histSeenMax = 100_000

// HistoryVersion changes whenever another process wrote the
// conversation's messages or steps, as far as this store has heard. ok
// is false while it cannot hear (its listener is reconnecting): the
// history must then be read every time.
func (p *Postgres) HistoryVersion(conversationID string) (v uint64, ok bool) {
	if !p.listening.Load() {
		return 0, false
	}
	p.histMu.Lock()
	defer p.histMu.Unlock()
	return max(p.histSeen[conversationID], p.histBase), true
}

// historyAnnounced takes an announcement; this process's own are
// ignored: its engine lays its own turns over what it read.
func (p *Postgres) historyAnnounced(payload string) {
	origin, conv, ok := strings.Cut(payload, " ")
	if !ok || origin == p.origin {
		return
	}
	p.histMu.Lock()
	defer p.histMu.Unlock()
	if len(p.histSeen) >= histSeenMax {
		p.historyMissedLocked()
	}
	p.histCount++
	p.histSeen[conv] = p.histCount
}

// historyMissed: announcements may have been missed (the listener was
// down); every version moves on.
func (p *Postgres) historyMissed() {
	p.histMu.Lock()
	defer p.histMu.Unlock()
	p.historyMissedLocked()
}

func (p *Postgres) historyMissedLocked() {
	clear(p.histSeen)
	p.histCount++
	p.histBase = p.histCount
}

// HistoryVersion of the memory store changes at every write to the
// conversation: it serves one process, but engines sharing it (tests)
// must see each other's turns.
func (m *Memory) HistoryVersion(conversationID string) (uint64, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.versions[conversationID], true
}
