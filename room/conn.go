package room

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/livekit/protocol/livekit"
	lksdk "github.com/livekit/server-sdk-go/v2"
	"github.com/prometheus/client_golang/prometheus"
)

// conn is a session's LiveKit room connection. The room is set once the
// SDK's join returned, which is when its connection is up: nothing waits
// for it by polling.
type conn struct {
	// lookup reads a participant's attributes from LiveKit's API.
	lookup func(ctx context.Context, identity string) (map[string]string, error)

	// list reads the room's participants from LiveKit's API.
	list func(ctx context.Context) ([]*livekit.ParticipantInfo, error)
	// viaServer sends a packet through LiveKit's server API; nil: never.
	// sentViaServer counts what it sent.
	viaServer     func(ctx context.Context, payload []byte, to []string) error
	sentViaServer prometheus.Counter
	// direct: the bot's own data channels are open (or were tried), so
	// packets go over them.
	direct atomic.Bool

	mu   sync.Mutex
	room *lksdk.Room
	// opened: see channelOpen.
	opened chan struct{}
	// listed: the connections of users LiveKit's API listed and the SDK
	// has not announced yet, by identity.
	listed map[string]string
	// self is the bot's own connection as last seen (see rejoined).
	self string
}

var errNotConnected = errors.New("not connected to the room")

func (c *conn) get() *lksdk.Room {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.room
}

// ready returns the room when its connection is up. While the SDK
// reconnects, a publish would wait and then reach whoever holds the
// identity by then, maybe a rejoined client that also gets the envelope
// by replay; failing it leaves it to replay, and the greeting is sent
// again until the user answers it.
func (c *conn) ready() (*lksdk.Room, error) {
	r := c.get()
	if r == nil || r.ConnectionState() != lksdk.ConnectionStateConnected {
		return nil, errNotConnected
	}
	return r, nil
}

func (c *conn) publish(payload []byte, to []string) error {
	r, err := c.ready()
	if err != nil {
		return err
	}
	return r.LocalParticipant.PublishDataPacket(lksdk.UserData(payload), lksdk.WithDataPublishReliable(true),
		lksdk.WithDataPublishTopic(Topic), lksdk.WithDataPublishDestination(to))
}

// greet sends a greeting through LiveKit's server API while the bot's own
// data channel is not open, and over it otherwise. The SDK opens the
// channel (a peer connection of its own) only when asked to send: a few
// hundred milliseconds, or a second when one of its handshake packets has
// to be sent again, on a server busy with other joins, which the first
// greeting would wait. Only greetings go this way: a packet sent through
// the API can arrive after one sent over the channel after it, and
// nothing reaches a user before its greeting but other greetings.
//
// LiveKit drops what its API sends to a user whose own data channel is
// not open yet, but holds for such a user what a participant sends over
// its channel. A greeting that went through the API therefore returns
// again, closed once the bot's channel is open: a repeat sent then
// cannot be lost. again is nil for a greeting sent over the channel.
func (c *conn) greet(payload []byte, to []string) (again <-chan struct{}, err error) {
	if _, err := c.ready(); err != nil {
		return nil, err
	}
	if !c.direct.Load() && c.viaServer != nil {
		ctx, cancel := context.WithTimeout(context.Background(), serverSendTimeout)
		err := c.viaServer(ctx, payload, to)
		cancel()
		if err == nil {
			c.sentViaServer.Inc()
			return c.channelOpen(), nil
		}
	}
	return nil, c.publish(payload, to)
}

// channelOpen is closed once the bot's own data channels are open, or the
// SDK gave up on them.
func (c *conn) channelOpen() chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.opened == nil {
		c.opened = make(chan struct{})
	}
	return c.opened
}

// rejoined says whether the bot's own connection changed since it was
// last seen. A resume keeps it; a rejoin, after the LiveKit server
// restarted, gets a new one, and every user it meets there is on a new
// connection too, even one the SDK still lists under the old.
func (c *conn) rejoined() bool {
	r := c.get()
	if r == nil {
		return false
	}
	sid := r.LocalParticipant.SID()
	c.mu.Lock()
	defer c.mu.Unlock()
	changed := sid != c.self
	c.self = sid
	return changed
}

// serverSendTimeout bounds an API send; past it the data channel, open
// or not by then, takes the packet.
const serverSendTimeout = 2 * time.Second

// openDataChannel has the SDK open the bot's data channels at once rather
// than at its first envelope, with a packet that reaches nobody (it is
// addressed to the bot itself), and from then on sends over them. It
// returns when they are open or the SDK gave up on them.
func (c *conn) openDataChannel(r *lksdk.Room) {
	defer func() {
		c.direct.Store(true)
		close(c.channelOpen())
	}()
	_ = r.LocalParticipant.PublishDataPacket(lksdk.UserData([]byte{0}), lksdk.WithDataPublishReliable(false),
		lksdk.WithDataPublishTopic(openTopic), lksdk.WithDataPublishDestination([]string{r.LocalParticipant.Identity()}))
}

// openTopic is the topic of the packet that opens the data channels.
const openTopic = "alicia.open"

func (c *conn) publishPacket(p *livekit.DataPacket, to []string) error {
	r, err := c.ready()
	if err != nil {
		return err
	}
	return r.LocalParticipant.PublishDataPacket(streamPacket{p}, lksdk.WithDataPublishReliable(true), lksdk.WithDataPublishDestination(to))
}

func (c *conn) setAttributes(attrs map[string]string) error {
	r, err := c.ready()
	if err != nil {
		return err
	}
	r.LocalParticipant.SetAttributes(attrs)
	return nil
}

func (c *conn) connection(identity string) string {
	r := c.get()
	if r == nil {
		return ""
	}
	// The SDK's lock is never taken under c.mu: its callbacks take c.mu.
	p := r.GetParticipantByIdentity(identity)
	c.mu.Lock()
	defer c.mu.Unlock()
	if p != nil {
		// From now on the SDK says when this connection ends.
		delete(c.listed, identity)
		return p.SID()
	}
	return c.listed[identity]
}

// listedUser notes a user's connection that LiveKit's API lists before
// the SDK announces it (awaitFirstUser).
func (c *conn) listedUser(identity, sid string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.listed == nil {
		c.listed = map[string]string{}
	}
	c.listed[identity] = sid
}

func (c *conn) attributes(ctx context.Context, identity string) (map[string]string, error) {
	return c.lookup(ctx, identity)
}

// streamChunkSize is LiveKit's byte-stream chunk size.
const streamChunkSize = 15_000

// streamPacket sends a hand-built data-stream packet: the SDK's stream
// writer waits about 200 ms per chunk for a buffer threshold it never
// sets, while these go out as fast as reliable packets do.
type streamPacket struct{ p *livekit.DataPacket }

func (s streamPacket) ToProto() *livekit.DataPacket { return s.p }

// publishStream sends an envelope too large for one packet as a byte
// stream on the alicia topic (MIME type application/msgpack), which
// LiveKit clients receive with a byte-stream handler.
func (c *conn) publishStream(payload []byte, to []string) error {
	r, err := c.ready()
	if err != nil {
		return err
	}
	id := uuid.NewString()
	size := uint64(len(payload))
	opts := []lksdk.DataPublishOption{lksdk.WithDataPublishReliable(true), lksdk.WithDataPublishDestination(to)}
	send := func(p *livekit.DataPacket) error {
		return r.LocalParticipant.PublishDataPacket(streamPacket{p}, opts...)
	}
	if err := send(&livekit.DataPacket{Value: &livekit.DataPacket_StreamHeader{StreamHeader: &livekit.DataStream_Header{
		StreamId: id, Timestamp: time.Now().UnixMilli(), Topic: Topic, MimeType: "application/msgpack", TotalLength: &size,
		ContentHeader: &livekit.DataStream_Header_ByteHeader{ByteHeader: &livekit.DataStream_ByteHeader{Name: "envelope.msgpack"}},
	}}}); err != nil {
		return err
	}
	for i := 0; len(payload) > 0; i++ {
		n := min(len(payload), streamChunkSize)
		if err := send(&livekit.DataPacket{Value: &livekit.DataPacket_StreamChunk{StreamChunk: &livekit.DataStream_Chunk{
			StreamId: id, ChunkIndex: uint64(i), Content: payload[:n]}}}); err != nil {
			return err
		}
		payload = payload[n:]
	}
	return send(&livekit.DataPacket{Value: &livekit.DataPacket_StreamTrailer{StreamTrailer: &livekit.DataStream_Trailer{StreamId: id}}})
}

// maxClientStream bounds what a client may send as a byte stream; the
// envelope decoder then refuses anything over 15 KiB with a clear error.
const maxClientStream = 1 << 20

func readStream(r io.Reader) []byte {
	b, _ := io.ReadAll(io.LimitReader(r, maxClientStream))
	return b
}

// isAlicia reports a topic the protocol travels on.
func isAlicia(topic string) bool { return topic == Topic || topic == "" }
