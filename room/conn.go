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

	// joined is closed when the bot's join returned, joined or not; nil
	// for a connection that is given its room as it is made.
	joined      chan struct{}
	endJoinOnce sync.Once

	mu   sync.Mutex
	room *lksdk.Room
	// listed holds the users announced to the session from LiveKit's API
	// (by identity, their connection's SID) while the SDK did not know
	// them: before its join returned, or before LiveKit's batched update
	// told it. The SDK's own events take over from it.
	listed map[string]string
}

var errNotConnected = errors.New("not connected to the room")

// endJoin records the end of the bot's join: r is its room, nil if the
// join failed.
func (c *conn) endJoin(r *lksdk.Room) {
	c.endJoinOnce.Do(func() {
		c.mu.Lock()
		c.room = r
		c.mu.Unlock()
		if c.joined != nil {
			close(c.joined)
		}
	})
}

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
//
// A packet sent while the bot is joining waits for the join: the first
// greeting goes out before it (greet), and a user who answers it at once
// reaches the bot, through LiveKit, before the join returns.
func (c *conn) ready() (*lksdk.Room, error) {
	if c.joined != nil {
		<-c.joined
	}
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
// nothing reaches a user before its greeting but other greetings. LiveKit
// drops what its API sends to a user whose own data channel is not open
// yet (it holds only what participants send); the greeting's repeat
// (greetAgain) covers that.
//
// It needs no connection of the bot's own: the first greeting can leave
// while the bot is still joining.
func (c *conn) greet(payload []byte, to []string) error {
	if !c.direct.Load() && c.viaServer != nil {
		ctx, cancel := context.WithTimeout(context.Background(), serverSendTimeout)
		err := c.viaServer(ctx, payload, to)
		cancel()
		if err == nil {
			c.sentViaServer.Inc()
			return nil
		}
	}
	return c.publish(payload, to)
}

// serverSendTimeout bounds an API send; past it the data channel, open
// or not by then, takes the packet.
const serverSendTimeout = 2 * time.Second

// openDataChannel has the SDK open the bot's data channels at once rather
// than at its first envelope, with a packet that reaches nobody (it is
// addressed to the bot itself), and from then on sends over them. It
// returns when they are open or the SDK gave up on them.
func (c *conn) openDataChannel(r *lksdk.Room) {
	defer c.direct.Store(true)
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
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.room != nil {
		if p := c.room.GetParticipantByIdentity(identity); p != nil {
			return p.SID()
		}
	}
	return c.listed[identity]
}

// humans is how many users the SDK knows in the room.
func (c *conn) humans() int {
	r := c.get()
	if r == nil {
		return 0
	}
	return countHumans(r)
}

// listUser notes a user found in LiveKit's API listing and reports whether
// it is new: neither the SDK nor an earlier listing knew it.
func (c *conn) listUser(identity, sid string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.room != nil && c.room.GetParticipantByIdentity(identity) != nil {
		return false
	}
	if _, ok := c.listed[identity]; ok {
		return false
	}
	if c.listed == nil {
		c.listed = make(map[string]string)
	}
	c.listed[identity] = sid
	return true
}

// takeListed returns the connection under which the user was announced
// from the API listing, if it was, and leaves the user to the SDK, which
// knows it now.
func (c *conn) takeListed(identity string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	sid := c.listed[identity]
	delete(c.listed, identity)
	return sid
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
