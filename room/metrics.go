package room

import "github.com/prometheus/client_golang/prometheus"

// Metrics counts what the room layer sees.
type Metrics struct {
	badInput     *prometheus.CounterVec
	packetsOut   prometheus.Counter
	streams      prometheus.Counter
	sendFailures prometheus.Counter
	replayed     prometheus.Counter
	jobs         *prometheus.CounterVec
	talkOver     *prometheus.CounterVec
	tokenRefused prometheus.Counter
	viaServer    prometheus.Counter
	usersListed  prometheus.Counter
}

// NewMetrics registers the room metrics on reg (nil: not exported).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		badInput: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "alicia", Subsystem: "room", Name: "bad_input_total",
			Help: "Client envelopes refused, by the error code answered (or 'agent' for packets from other agents, not answered)."}, []string{"code"}),
		packetsOut: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "alicia", Subsystem: "room", Name: "envelopes_sent_total",
			Help: "Envelopes published, replays included."}),
		streams: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "alicia", Subsystem: "room", Name: "byte_streams_total",
			Help: "Envelopes over 15 KiB sent as byte streams."}),
		sendFailures: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "alicia", Subsystem: "room", Name: "send_failures_total",
			Help: "Publishes that failed; the envelope waits in the replay log."}),
		replayed: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "alicia", Subsystem: "room", Name: "envelopes_replayed_total",
			Help: "Envelopes sent again to resuming clients."}),
		jobs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "alicia", Subsystem: "room", Name: "jobs_total",
			Help: "Agent jobs by outcome: accepted, refused, yielded (the room has a live bot already), done, failed, handed_over, taken_over, dispatched_again (LiveKit dropped a dispatch this process asked for)."}, []string{"outcome"}),
		talkOver: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "alicia", Subsystem: "voice", Name: "talk_over_total",
			Help: "What users' speech over the agent or to it came to: interruption (the agent stopped), false_interruption (no words; it resumed), unrecognised (speech with no transcript; no turn), noise (a sound over the agent that was not voice; it did not pause), echo (the agent's own voice coming back through a user's microphone; removed, it did not pause)."}, []string{"outcome"}),
		tokenRefused: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "alicia", Subsystem: "room", Name: "token_throttled_total",
			Help: "POST /v1/token requests refused 429 because their address sent too many wrong secrets."}),
		viaServer: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "alicia", Subsystem: "room", Name: "envelopes_via_server_total",
			Help: "Envelopes sent through LiveKit's server API because the bot's own data channel in the room was not open yet (its first ones, the greeting above all)."}),
		usersListed: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "alicia", Subsystem: "room", Name: "users_listed_total",
			Help: "Users a bot alone in its room found by asking LiveKit's API, before LiveKit announced them (it announces users who publish nothing in batches, seconds late)."}),
	}
	if reg != nil {
		reg.MustRegister(m.tokenRefused, m.viaServer, m.usersListed)
		reg.MustRegister(m.badInput, m.packetsOut, m.streams, m.sendFailures, m.replayed, m.jobs, m.talkOver)
	}
	return m
}

// Interrupted, FalseInterruption, Unrecognised, NoiseIgnored and
// EchoRejected make the metrics the voice stage's Observer.
func (m *Metrics) Interrupted()       { m.talkOver.WithLabelValues("interruption").Inc() }
func (m *Metrics) FalseInterruption() { m.talkOver.WithLabelValues("false_interruption").Inc() }
func (m *Metrics) Unrecognised()      { m.talkOver.WithLabelValues("unrecognised").Inc() }
func (m *Metrics) NoiseIgnored()      { m.talkOver.WithLabelValues("noise").Inc() }
func (m *Metrics) EchoRejected()      { m.talkOver.WithLabelValues("echo").Inc() }
