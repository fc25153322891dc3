package echo

import (
	"math"
	"time"
)

// cacheHops is how many hops of the reference a suppressor keeps
// analysed: the lags looked at, the taps past the longest, and a few
// more (about 56 KB, half of it the bins).
const cacheHops = 96

// refHop is one hop of the reference as a suppressor sees it.
type refHop struct {
	power [bands]float32
	bins  [bins]binPower
	// level are its band levels, rise those less the hop before's, and
	// variance the rises' sum of squares: the delay estimator's features.
	level, rise [bands]float32
	variance    float32
	loud        bool
	// voice: loud across the spectrum, as speech is, not a tone (the
	// thinking cue's) whose echo says little of where the path is.
	voice bool
}

// refCache is a suppressor's analysis of the reference, hop by hop, done
// only while the suppressor works: a microphone that carries no echo
// costs none.
type refCache struct {
	ref *Reference
	st  refState
	a   *analyser
	// hops[k%cacheHops] is hop k, for the hops up to the last asked for;
	// done is the last hop analysed for good (later ones were not all sent
	// yet when they were).
	hops [cacheHops]refHop
	done int64
	// silent is a hop of nothing sent.
	silent refHop
}

func newRefCache(ref *Reference) *refCache {
	c := &refCache{ref: ref, done: math.MinInt64 / 2}
	for b := range c.silent.level {
		c.silent.level[b] = floorDB
	}
	return c
}

// hopOf is the reference hop whose window ends last at or before t: the
// one an echo heard at t comes from if its delay is 0.
func (c *refCache) hopOf(t time.Time) int64 {
	return int64(math.Floor(t.Sub(c.st.epoch).Seconds()*1000/hopDuration)) - 1
}

// sync takes the reference's state; false when it has sent nothing yet.
// A reference that started over (another rate) is analysed afresh.
func (c *refCache) sync() bool {
	st := c.ref.state()
	if st.rate == 0 {
		return false
	}
	if st.gen != c.st.gen || c.a == nil {
		if per, _ := hopSamples(st.rate); c.a == nil || c.a.n != 2*per {
			c.a = newAnalyser(st.rate)
		}
		c.done = math.MinInt64 / 2
	}
	c.st = st
	return true
}

// ensure analyses the hops up to k that were not, as of now (the
// microphone hop's time).
func (c *refCache) ensure(k int64, now time.Time) {
	from := max(c.done+1, k-cacheHops+1, 0)
	if from > c.done+1 {
		c.done = from - 1
	}
	for j := from; j <= k; j++ {
		if c.analyse(j, now) && c.done == j-1 {
			c.done = j
		}
	}
}

// at is hop k, which ensure has seen, or silence before the reference
// began.
func (c *refCache) at(k int64) *refHop {
	if k < 0 {
		return &c.silent
	}
	return &c.hops[k%cacheHops]
}

// analyse takes hop j's spectrum into the cache, and says whether it is
// final: all of its window was sent, or its time is past enough that
// what was not never will be. Hop j-1 is analysed already, or silence.
func (c *refCache) analyse(j int64, now time.Time) bool {
	n, _ := hopSamples(c.st.rate)
	per := int64(n)
	start, end := (j-1)*per, (j+1)*per
	final := end <= c.st.end || c.st.epoch.Add(time.Duration(j+1)*hopDuration*time.Millisecond).Before(now.Add(-40*time.Millisecond))
	energy, ok := c.ref.read(c.a.buf, start, c.st.gen)
	h := &c.hops[j%cacheHops]
	var p powers
	var sp spectrum
	h.loud = ok && energy > minLevel*minLevel*float64(len(c.a.buf))
	if h.loud {
		c.a.analyse(&sp, &p)
	}
	h.voice = h.loud && p.broad()
	for i, v := range sp {
		h.bins[i] = toBinPower(v)
	}
	before := c.at(j - 1)
	if j == 0 {
		before = &c.silent
	}
	l := p.levels()
	h.variance = 0
	for b := range l {
		h.power[b] = float32(p[b])
		h.level[b] = float32(l[b])
		h.rise[b] = h.level[b] - before.level[b]
		h.variance += h.rise[b] * h.rise[b]
	}
	return final
}

// binPower is a bin's power in the 16 bits of a bfloat16: the top half
// of a float32, rounded, so within 0.4% (0.02 dB). The bins are most of
// what a suppressor keeps of each hop of the reference; as float32 they
// were 62 KB of its 88. Like the powers, the codes are ordered, so the
// loudest of several bins is the largest code.
type binPower uint16

func toBinPower(v float64) binPower {
	b := math.Float32bits(float32(v))
	b += 0x7fff + (b>>16)&1 // round half to even
	return binPower(b >> 16)
}

func (p binPower) float() float64 { return float64(math.Float32frombits(uint32(p) << 16)) }
