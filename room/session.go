package room

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/livekit/protocol/livekit"

	"github.com/alicia-voice/alicia/internal/queue"
	"github.com/alicia-voice/alicia/pipeline"
	"github.com/alicia-voice/alicia/pipeline/voice"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

// Topic is the data topic of the Alicia protocol. Packets without a topic
// are accepted too, from clients older than it.
const Topic = "alicia"

// Conversation is the engine's side of a room (pipeline.Conversation):
// the session hands it every client envelope except the handshake's, in
// arrival order, and the features each client announced, as data.
type Conversation interface {
	// Handle must not block.
	Handle(face pipeline.Face, in pipeline.Inbound)
	// Configure takes a client's features and returns the reasoning
	// features in effect for it; Greeting those of a client not yet
	// configured.
	Configure(ctx context.Context, identity string, features wire.Features) []string
	Greeting(ctx context.Context, identity string) []string
	// Features are the server's own features stated in its Configuration.
	Features() []string
	// Recover ends, for face's clients and in storage, the answers a dead
	// process left streaming.
	Recover(face pipeline.Face)
	Close()
}

// publisher sends bytes into the room; a Conn does it over LiveKit.
type publisher interface {
	// publish sends one packet of at most wire.MaxPacketBytes.
	publish(payload []byte, to []string) error
	// greet sends a greeting, which may go another way than publish's
	// packets when that is faster, and may arrive after packets published
	// after it. A greeting that may have been lost on that way returns
	// again, closed when a repeat would not be.
	greet(payload []byte, to []string) (again <-chan struct{}, err error)
	// publishStream sends a larger payload as a LiveKit byte stream.
	publishStream(payload []byte, to []string) error
	// connection names the identity's current connection ("" if absent).
	connection(identity string) string
	// attributes asks LiveKit for a participant's attributes, for one
	// whose packets reach the bot before the bot is told it joined.
	attributes(ctx context.Context, identity string) (map[string]string, error)
	// publishPacket sends a data-stream packet built by hand (the
	// lk.transcription streams).
	publishPacket(p *livekit.DataPacket, to []string) error
	// setAttributes sets the bot's own participant attributes.
	setAttributes(attrs map[string]string) error
}

// sent is one envelope in the session's replay log.
type sent struct {
	stanza  int32
	payload []byte
	to      []string
	// handshake envelopes (greetings, handshake errors) reach their
	// connection at once and are never replayed.
	handshake bool
}

// Session owns one conversation: the envelopes that come in, handled in
// order, and the envelopes that go out, numbered −1, −2, −3… and sent in
// that order.
type Session struct {
	ID      string
	log     *slog.Logger
	store   storage.Store
	conv    Conversation
	metrics *Metrics
	out     publisher

	// inbox: what the room delivered, handled in order by run.
	inbox *queue.Queue[rawPacket]
	ctx   context.Context
	stop  context.CancelFunc
	wg    sync.WaitGroup

	// The writer goroutine's: the queue of ops it runs, and what only it
	// touches.
	ops        *queue.Queue[func()]
	quit       chan struct{}
	writerDone chan struct{}
	// wctx ends the writer's I/O once Close gave up waiting for it.
	wctx      context.Context
	wcancel   context.CancelFunc
	closeOnce sync.Once
	// next and limit: the stanza magnitudes reserved and not used yet.
	next, limit int32
	// members maps each user in the room to the connection that is in
	// sync ("" until its handshake). A user who (re)joined receives nothing
	// but the handshake until its Configuration: what it missed, and what
	// is sent meanwhile, reaches it once, by replay. LiveKit replaces a
	// quickly rejoining participant without any event, so the connection
	// id is checked at every send.
	members map[string]string
	// speech is what the voice stage publishes, and the agent's state.
	speech *speech
	ring   []sent
	// ringBytes bounds the in-memory log by size as well as count.
	ringBytes int

	seenMu sync.Mutex
	seen   map[string]map[int32]uint64 // identity → client stanza → payload hash

	ownerMu sync.Mutex
	owner   string
	// present: the users in the room now.
	present map[string]bool
	// features and tools each client announced, in its Configuration or
	// its participant attributes (the later of the two), without the
	// preference it may have stated.
	features map[string]wire.Features
	tools    map[string][]wire.ClientTool
	// known: the users whose clients said what they can display, on their
	// current connection.
	known map[string]bool

	// held: what users sent before their clients said what they can
	// display, answered once they have. Owned by the run goroutine.
	held map[string][]pipeline.Inbound
	// asked: users whose attributes were fetched from LiveKit because
	// their packets came before their arrival. Owned by the run goroutine.
	asked map[string]bool

	// assumeAfter and assumedFeatures: a client that holds messages
	// without sending a Configuration for assumeAfter is served as one
	// that announced assumedFeatures (see assume).
	assumeAfter     time.Duration
	assumedFeatures wire.Features
	// asking: the users whose grace is running, with the number of the
	// timer that ends it (an older timer's end is ignored). Owned by the
	// run goroutine.
	asking    map[string]uint64
	askingGen uint64
	// assumed: the users whose features were assumed, not announced.
	// Under ownerMu.
	assumed map[string]bool

	// reasoning: the readers of reasoning streams and the open streams.
	reasoning reasoningStreams
	// stateShown: the connection of each user the agent's state was shown
	// to again (showStateAgain). Owned by the run goroutine.
	stateShown map[string]string
}

// Participant attributes a client sets (with setAttributes, or through
// POST /v1/token into its token) instead of, or besides, sending a
// Configuration: LiveKit keeps them and syncs them to a bot that joins
// later, where a data packet sent before the bot joined reaches nobody.
const (
	// AttrFeatures is the client's features, comma-separated, as in a
	// Configuration ("streaming,reasoning_steps,partial_reasoning").
	AttrFeatures = "alicia.features"
	// AttrReasoningPreference sets the user's show-reasoning preference
	// (off, summary or full), like the reasoning_preference:<mode> feature.
	AttrReasoningPreference = "alicia.reasoning_preference"
)

// heldMax bounds what one unconfigured user can make the bot keep.
const heldMax = 64

const (
	replayMax      = 4096
	replayMaxBytes = 16 << 20
	seenMax        = 4096
	// inboxMax bounds the data packets waiting to be handled; room events
	// always get in.
	inboxMax = 2048
)

type rawPacket struct {
	from     string
	payload  []byte
	received time.Time
	// event: a room event rather than a data packet, queued with the
	// packets so that a Configuration and an attribute change are applied
	// in the order they arrived (the later wins).
	event eventKind
	attrs map[string]string
	// text is an lk.chat message (eventChat).
	text string
	// gen names the grace timer that ended (eventAssume).
	gen uint64
}

type eventKind uint8

const (
	eventNone eventKind = iota
	eventArrived
	eventLeft
	eventAttributes
	eventChat
	// eventAssume: a user's grace for its Configuration ended.
	eventAssume
)

// SessionConfig builds a Session.
type SessionConfig struct {
	ID      string
	Store   storage.Store
	Open    func(id string) Conversation
	Metrics *Metrics
	Logger  *slog.Logger
	// AssumeAfter and AssumedFeatures: see Config.
	AssumeAfter     time.Duration
	AssumedFeatures *wire.Features
}

func newSession(parent context.Context, c SessionConfig, out publisher) *Session {
	s := &Session{ID: c.ID, log: c.Logger.With("conversation", c.ID), store: c.Store,
		metrics: c.Metrics, out: out, inbox: queue.New[rawPacket](),
		ops: queue.New[func()](), quit: make(chan struct{}), writerDone: make(chan struct{}),
		seen: map[string]map[int32]uint64{}, members: map[string]string{}, present: map[string]bool{}, features: map[string]wire.Features{}, tools: map[string][]wire.ClientTool{},
		known: map[string]bool{}, held: map[string][]pipeline.Inbound{}, asked: map[string]bool{},
		assumeAfter: c.AssumeAfter, assumedFeatures: defaultAssumedFeatures, asking: map[string]uint64{}, assumed: map[string]bool{}}
	if s.assumeAfter <= 0 {
		s.assumeAfter = defaultAssumeAfter
	}
	if c.AssumedFeatures != nil {
		s.assumedFeatures = withoutPreference(*c.AssumedFeatures)
	}
	s.speech = &speech{s: s, answers: map[string]*textStream{}}
	s.ctx, s.stop = context.WithCancel(parent)
	s.wctx, s.wcancel = context.WithCancel(context.WithoutCancel(parent))
	s.conv = c.Open(c.ID)
	// This bot may be taking the conversation over from one that died.
	s.conv.Recover(s)
	go s.write()
	s.wg.Add(1)
	go s.run()
	return s
}

// Members is the users in the room with what each client announced:
// the engine's Roster.
func (s *Session) Members() []pipeline.Member {
	s.ownerMu.Lock()
	defer s.ownerMu.Unlock()
	ids := slices.Sorted(maps.Keys(s.present))
	out := make([]pipeline.Member, 0, len(ids))
	for _, id := range ids {
		out = append(out, pipeline.Member{Identity: id, Features: s.features[id], Tools: s.tools[id], ReasoningStreams: s.readsStreams(id)})
	}
	return out
}

// setAgentState publishes the agent's state (lk.agent.state), on the
// writer.
func (s *Session) setAgentState(st voice.State) { s.post(func() { s.speech.setState(st) }) }

// reconnected is the room's connection back after the SDK resumed it,
// or rejoined it: what could not be published meanwhile and is not
// replayed is sent again. After a rejoin nobody is in sync: every user's
// connection is new, and the SDK may list one under its old connection
// for seconds, long enough for what is sent meanwhile to reach the new
// one before its handshake, and again in the replay that answers it. It
// runs on the SDK's callback, before the bot's new connection can carry
// a user's handshake.
func (s *Session) reconnected(rejoined bool) {
	s.post(func() {
		if rejoined {
			for id := range s.members {
				s.members[id] = ""
			}
		}
		s.speech.reconnected()
	})
}

// drainWait bounds how long Close lets the writer send what is queued.
const drainWait = 5 * time.Second

// Close stops the session and waits for every goroutine it owns: the
// inbox, the conversation's turns, then the writer, which sends what they
// queued (for at most drainWait).
func (s *Session) Close() {
	s.closeOnce.Do(s.close)
}

func (s *Session) close() {
	s.stop()
	s.wg.Wait()
	s.conv.Close()
	close(s.quit)
	select {
	case <-s.writerDone:
	case <-time.After(drainWait):
		s.wcancel()
		<-s.writerDone
	}
	s.wcancel()
}

// Done is closed when the session stops.
func (s *Session) Done() <-chan struct{} { return s.ctx.Done() }
