package room

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/livekit/protocol/livekit"
	"google.golang.org/protobuf/proto"

	"github.com/alicia-voice/alicia/internal/testenv"
	"github.com/alicia-voice/alicia/storage"
	"github.com/alicia-voice/alicia/wire"
)

// LiveKit answers a worker's registration before it records the worker,
// and dispatches a room made in between to nobody, for good: in CI a
// user's room made just after the worker registered never saw its bot.
// The worker counts as registered only once LiveKit answered what it sent
// after its registration, which LiveKit reads after recording it.
func TestRegisteredOnceLiveKitRecordedTheWorker(t *testing.T) {
	lk := testenv.StartLiveKit(t)
	relay := holdPong(t, lk)
	e := runAgent(t, lk, storage.NewMemory(storage.ReasoningPlain), func(c *Config) { c.LiveKitURL = relay.url }, testenv.Log(t))

	select {
	case <-relay.ponged:
	case <-time.After(10 * time.Second):
		t.Fatal("LiveKit answered no ping of the worker's after its registration")
	}
	select {
	case <-e.agent.Registered():
		t.Fatal("registered before LiveKit's answer to the worker's ping came")
	default:
	}
	if e.agent.Ready() == nil {
		t.Fatal("ready before LiveKit's answer to the worker's ping came")
	}
	relay.release()
	select {
	case <-e.agent.Registered():
	case <-time.After(10 * time.Second):
		t.Fatal("not registered once LiveKit answered")
	}
	if err := e.agent.Ready(); err != nil {
		t.Fatalf("registered but not ready: %v", err)
	}

	// A room made at once, as a page opened on the announced link makes
	// it, has its bot.
	cfg := e.cfg
	cfg.LiveKitURL = lk.URL
	token, err := UserToken(cfg, "conv_at_once", "alice", "alice", map[string]string{AttrFeatures: wire.FeatureStreaming})
	if err != nil {
		t.Fatal(err)
	}
	alice := joinWithToken(t, lk, token)
	alice.wait("the greeting", func(g []*wire.Envelope) bool { return count[*wire.Configuration](g) > 0 })
}

// relay stands between a worker and LiveKit: it passes everything
// through, but holds LiveKit's first pong until release, and reports it.
type relay struct {
	url     string
	ponged  chan struct{}
	release func()
}

func holdPong(t *testing.T, lk *testenv.LiveKit) *relay {
	t.Helper()
	target, err := url.Parse(strings.Replace(lk.URL, "ws://", "http://", 1))
	if err != nil {
		t.Fatal(err)
	}
	released, stop := make(chan struct{}), make(chan struct{})
	var releaseOnce, pongOnce sync.Once
	r := &relay{ponged: make(chan struct{}), release: func() { releaseOnce.Do(func() { close(released) }) }}
	mux := http.NewServeMux()
	// The bot's room connection and the room API go straight through.
	mux.Handle("/", httputil.NewSingleHostReverseProxy(target))
	mux.HandleFunc("/agent", func(w http.ResponseWriter, req *http.Request) {
		up, _, err := websocket.DefaultDialer.Dial(lk.URL+"/agent", http.Header{"Authorization": req.Header["Authorization"]})
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer up.Close()
		down, err := (&websocket.Upgrader{}).Upgrade(w, req, nil)
		if err != nil {
			return
		}
		toServer := make(chan struct{})
		go func() {
			defer close(toServer)
			defer up.Close()
			for {
				typ, b, err := down.ReadMessage()
				if err != nil || up.WriteMessage(typ, b) != nil {
					return
				}
			}
		}()
		defer func() {
			down.Close()
			<-toServer
		}()
		for {
			typ, b, err := up.ReadMessage()
			if err != nil {
				return
			}
			var m livekit.ServerMessage
			if proto.Unmarshal(b, &m) == nil && m.GetPong() != nil {
				pongOnce.Do(func() { close(r.ponged) })
				select {
				case <-released:
				case <-stop:
					return
				}
			}
			if down.WriteMessage(typ, b) != nil {
				return
			}
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		close(stop)
		srv.Close()
	})
	r.url = strings.Replace(srv.URL, "http://", "ws://", 1)
	return r
}
