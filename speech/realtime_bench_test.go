package speech_test

import (
	"context"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/alicia-voice/alicia/internal/speechtest"
	"github.com/alicia-voice/alicia/speech"
)

// countingListener counts the bytes clients send to a server, whatever
// the protocol: HTTP uploads and WebSocket frames alike.
type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{c, l.n}, nil
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.n.Add(int64(n))
	return n, err
}

// processCPU is the CPU time of this process and of the children it has
// waited for: the stand-in's pocketsphinx and sox.
func processCPU() time.Duration {
	var self, children syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	return time.Duration(self.Utime.Nano() + self.Stime.Nano() + children.Utime.Nano() + children.Stime.Nano())
}

// BenchmarkInterimCost: what recognising one utterance with interim
// transcripts costs. http is the stage's way before the realtime client:
// the utterance so far uploaded again every InterimEvery (1 s), then the
// whole of it for the final transcript, so the upload grows with the
// square of the length. realtime sends each sample once, as spoken, on a
// connection opened once per speaker, and the server recognises once.
// upload-bytes/op is what the client sent; cpu-ms/op is client, server
// and recogniser processes together (the stand-in runs in this process).
func BenchmarkInterimCost(b *testing.B) {
	spoken := speechtest.Render(b, question, 140, rate)
	for _, seconds := range []int{4, 10} {
		utterance := make([]int16, 0, seconds*rate)
		for len(utterance) < seconds*rate {
			utterance = append(utterance, spoken...)
			utterance = append(utterance, speechtest.Silence(300, rate)...)
		}
		utterance = utterance[:seconds*rate]
		for _, transport := range []string{"http", "realtime"} {
			b.Run(transport+"/"+time.Duration(seconds*int(time.Second)).String(), func(b *testing.B) {
				var sent atomic.Int64
				base := speechStandin(b, &sent) + "/v1"
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				defer cancel()
				var stream *speech.RealtimeStream
				if transport == "realtime" {
					var err error
					if stream, err = (&speech.RealtimeRecognizer{URL: base, Model: "whisper-1"}).Open(ctx); err != nil {
						b.Fatal(err)
					}
					defer stream.Close()
				}
				rec := &speech.OpenAIRecognizer{URL: base, Model: "whisper-1", Streaming: true}
				recognise := func(audio []int16) {
					for ev := range rec.Stream(ctx, &speech.RecognizeRequest{Audio: audio, SampleRate: rate}) {
						if ev.Kind == speech.RecognizeError {
							b.Fatal(ev.Err)
						}
					}
				}
				sent.Store(0)
				cpu := processCPU()
				b.ResetTimer()
				for range b.N {
					if transport == "http" {
						for k := 1; k < seconds; k++ {
							recognise(utterance[:k*rate])
						}
						recognise(utterance)
						continue
					}
					for i := 0; i < len(utterance); i += frameSamples {
						if err := stream.Append(utterance[i:min(i+frameSamples, len(utterance))]); err != nil {
							b.Fatal(err)
						}
					}
					utt, err := stream.Commit()
					if err != nil {
						b.Fatal(err)
					}
					for ev := range stream.Events() {
						if ev.Utterance == utt && ev.Kind == speech.RecognizeError {
							b.Fatal(ev.Err)
						}
						if ev.Utterance == utt && ev.Kind == speech.RecognizeFinal {
							break
						}
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(sent.Load())/float64(b.N), "upload-bytes/op")
				b.ReportMetric(float64((processCPU()-cpu).Microseconds())/1000/float64(b.N), "cpu-ms/op")
			})
		}
	}
}
