package echo

import (
	"math"
	"sync"
	"time"
)

// Reference is what the agent's voice sent, as it left: the audio an
// echo in a user's microphone is made of. One writer (the voice track's
// clock, which must never wait) and any number of readers (each
// microphone's Suppressor). The zero value is ready. It keeps the audio
// only while a reader wants it (a microphone that may carry an echo, or
// that someone talks over the agent in): the others, most, need only to
// know when the agent talked.
type Reference struct {
	mu sync.Mutex
	// wanted counts the readers that want the audio kept.
	wanted int
	// gen changes when the rate does: readers start over.
	gen  int
	rate int
	// epoch is the time of sample position 0; end the position one past
	// the last sample written; ring holds the last refSpan of them.
	epoch time.Time
	end   int64
	ring  []int16
	// sound is when the last frame written ends.
	sound time.Time
}

// refSpan is how much of the agent's voice is kept (48 KB at 24 kHz):
// the longest echo delay looked for, the echo path's taps and an
// analysis window, and 150 ms for a listener that runs a little behind
// its microphone.
const refSpan = time.Second

// Write takes a frame of sound the agent's voice sent at at, at rate, one
// whose hops are whole samples (hopSamples). A frame at another rate is
// not kept, and the agent's voice at that rate is not taken out.
// Frames not written (a pause, the silence a track does not send) are
// silence in the reference. It copies frame and never blocks for long:
// the track's clock calls it.
func (r *Reference) Write(frame []int16, rate int, at time.Time) {
	if _, whole := hopSamples(rate); len(frame) == 0 || rate <= 0 || !whole {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if rate != r.rate {
		r.gen++
		r.rate, r.epoch, r.end, r.ring = rate, at, 0, nil
	}
	switch {
	case r.wanted == 0:
		r.ring = nil
	case r.ring == nil:
		// What was sent before anyone wanted it is silence.
		r.ring = make([]int16, int(refSpan)*rate/int(time.Second))
	}
	n := int64(len(frame))
	p := r.end
	// A track sends frame after frame, and a client plays them back to
	// back whatever the jitter of the sender's clock: a frame within
	// half a frame of the last one's end follows it. One that comes later
	// follows a gap of silence in whole frames, as a track leaves when it
	// has nothing to send, or when it was stalled too long to catch up.
	if gap := int64(math.Round(at.Sub(r.epoch).Seconds()*float64(rate))) - r.end; gap >= n/2 {
		p += (gap + n/2) / n * n
	}
	if size := int64(len(r.ring)); size > 0 {
		a, b := r.span(r.end, p)
		clear(a)
		clear(b)
		kept := frame[max(0, n-size):]
		a, b = r.span(p+n-int64(len(kept)), p+n)
		copy(b, kept[copy(a, kept):])
	}
	r.end = p + n
	r.sound = r.timeOf(r.end)
}

// span is the ring's room for sample positions from to to, the last
// len(ring) of them: one slice, or two where it wraps around.
func (r *Reference) span(from, to int64) (a, b []int16) {
	size := int64(len(r.ring))
	from = max(from, to-size)
	if from >= to {
		return nil, nil
	}
	start, end := from%size, from%size+to-from
	if end <= size {
		return r.ring[start:end], nil
	}
	return r.ring[start:], r.ring[:end-size]
}

// want says that a reader wants the audio kept from now on (keep), or
// no longer; each reader says each once.
func (r *Reference) want(keep bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if keep {
		r.wanted++
	} else {
		r.wanted--
	}
}

// timeOf is when sample position p was sent.
func (r *Reference) timeOf(p int64) time.Time {
	return r.epoch.Add(time.Duration(p) * time.Second / time.Duration(r.rate))
}

// refState is what a reader needs to know of the reference at a moment.
type refState struct {
	gen, rate int
	epoch     time.Time
	end       int64
	sound     time.Time
}

func (r *Reference) state() refState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return refState{gen: r.gen, rate: r.rate, epoch: r.epoch, end: r.end, sound: r.sound}
}

// read fills dst with the samples from position from on, as floats; a
// sample not sent, or no longer kept, is silence. It returns the sum of
// their squares; false if the reference started over since gen.
func (r *Reference) read(dst []float32, from int64, gen int) (energy float64, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if gen != r.gen {
		return 0, false
	}
	clear(dst)
	if len(r.ring) == 0 {
		return 0, true
	}
	// Positions before 0 were never sent; those before the ring's were
	// sent and are forgotten.
	lo := max(from, r.end-int64(len(r.ring)), 0)
	hi := min(from+int64(len(dst)), r.end)
	a, b := r.span(lo, hi)
	out := dst[min(lo-from, int64(len(dst))):] // lo is from or later
	for _, part := range [2][]int16{a, b} {
		for i, v := range part {
			out[i] = float32(v)
			energy += float64(v) * float64(v)
		}
		out = out[len(part):]
	}
	return energy, true
}
