// Package echo removes the agent's own voice from a user's microphone: a
// speakerphone without a working echo canceller plays the agent's answer
// and sends it back, 50 to 400 ms late, quieter, coloured by the room and
// coded by Opus twice. The server knows exactly what it sent and when
// (Reference), so each microphone's Suppressor uses that as its echo
// reference.
//
// The echo is removed band by band, not sample by sample: Opus's CELT
// layer keeps each band's energy and not the waveform, so after two codings
// no linear echo canceller could follow the echo's phase, while its band
// energies still follow the agent's. A Suppressor takes short-time
// spectra (20 ms windows every 10 ms, 21 bands up to 8 kHz) of the
// microphone and of the reference, and
//   - finds the echo's delay by correlating the rises of the two's band
//     levels (the microphone's floored over the room's noise in each
//     band) over lags of 0 to 800 ms, and locks only on a clear peak
//     (estimator);
//   - learns the echo path's gain per band over a few taps around that
//     delay, only while the echo alone explains the microphone (path);
//   - takes the predicted echo out of each bin with a gain floored at
//     -20 dB, and a frame the echo explains whole (by a narrower margin
//     just after the user was heard over it) down to the room's noise,
//     then adds the frames back up into 16 kHz audio (gains).
//
// Until a delay is found the echo is bounded from above: no louder than
// the agent was in any band anywhere in the window of delays. A
// microphone that stays quiet while an echo of the agent's voice (not of
// a tone, whose echo says little) was due carries none, and
// its audio then goes through untouched. So does all audio while the
// agent has not talked in the last 850 ms, and every silent frame: a
// microphone that never echoes costs a copy.
//
// It imports nothing of the project: the voice stage feeds it.
package echo
