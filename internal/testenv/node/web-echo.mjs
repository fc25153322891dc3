// Alicia's web client on a phone on speaker with no echo canceller: the
// page is told to open the microphone raw (alicia.microphone.processing
// = false, so Chromium's echo cancellation is off), and its microphone
// is a room where the bot's voice, as the page receives it, comes back
// input.echo.delayMs late, input.echo.gainDB quieter, through a lowpass
// and one reflection, over a faint noise. The user asks input.question
// (16-bit PCM at input.rate, base64) and the page listens to the answer
// to its end. The result is what the page showed; the Go test
// reads the server's counters.
import { run } from './browser.mjs';
import { desktop, installAnswerOf, join } from './web-page.mjs';

// speakerRoom replaces the page's microphone before its code runs. It
// keeps the constraints the page asked for, echoes every audio track the
// page receives, and plays what window.__room.say is given.
const speakerRoom = ({ delayMs, gainDB }) => {
  localStorage.setItem('alicia.microphone.processing', 'false');
  const asked = [];
  let ctx = null;
  let mic = null;
  const echoed = [];
  const waiting = [];
  const start = () => {
    if (ctx) return;
    ctx = new AudioContext({ sampleRate: 48000 });
    mic = ctx.createMediaStreamDestination();
    // A faint room (about -60 dBFS): a microphone is never digitally
    // silent.
    const noise = ctx.createBuffer(1, ctx.sampleRate * 2, ctx.sampleRate);
    const n = noise.getChannelData(0);
    for (let i = 0; i < n.length; i++) n[i] = (Math.random() * 2 - 1) * 0.0017;
    const src = ctx.createBufferSource();
    src.buffer = noise;
    src.loop = true;
    src.connect(mic);
    src.start();
    for (const t of waiting.splice(0)) echo(t);
  };
  const echo = (track) => {
    // A renegotiation that keeps a track fires 'track' for it again; a
    // phone plays each track once, and two copies made the echo 6 dB
    // louder than the test says.
    if (echoed.includes(track.id) || waiting.includes(track)) return;
    if (!ctx) {
      waiting.push(track);
      return;
    }
    const src = ctx.createMediaStreamSource(new MediaStream([track]));
    const lowpass = ctx.createBiquadFilter();
    lowpass.type = 'lowpass';
    lowpass.frequency.value = 3000;
    const direct = ctx.createDelay(1);
    direct.delayTime.value = delayMs / 1000;
    const reflection = ctx.createDelay(1);
    reflection.delayTime.value = (delayMs + 17) / 1000;
    const level = ctx.createGain();
    level.gain.value = 10 ** (gainDB / 20);
    const reflected = ctx.createGain();
    reflected.gain.value = 0.4 * 10 ** (gainDB / 20);
    src.connect(lowpass);
    lowpass.connect(direct).connect(level).connect(mic);
    lowpass.connect(reflection).connect(reflected).connect(mic);
    echoed.push(track.id);
  };
  const Native = window.RTCPeerConnection;
  window.RTCPeerConnection = class extends Native {
    constructor(...args) {
      super(...args);
      this.addEventListener('track', (e) => {
        if (e.track.kind === 'audio') echo(e.track);
      });
    }
  };
  navigator.mediaDevices.getUserMedia = async (constraints) => {
    asked.push(JSON.parse(JSON.stringify(constraints)));
    if (!constraints.audio) throw new DOMException('only a microphone here', 'NotFoundError');
    start();
    await ctx.resume();
    return new MediaStream([mic.stream.getAudioTracks()[0].clone()]);
  };
  window.__room = {
    asked,
    echoed,
    say(b64, rate) {
      const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
      const pcm = new Int16Array(bytes.buffer);
      const buf = ctx.createBuffer(1, pcm.length, rate);
      const ch = buf.getChannelData(0);
      for (let i = 0; i < pcm.length; i++) ch[i] = pcm[i] / 32768;
      const src = ctx.createBufferSource();
      src.buffer = buf;
      src.connect(mic);
      src.start();
    },
  };
};

run(async ({ input, newPage }) => {
  const page = await newPage(desktop);
  await page.addInitScript(speakerRoom, input.echo);
  await join(page, input);
  await page.evaluate(installAnswerOf);
  await page.getByRole('button', { name: 'Talk' }).click();
  await page.waitForFunction(() => window.__room.asked.length > 0, null, { timeout: 15_000 });
  await page.evaluate(({ pcm, rate }) => window.__room.say(pcm, rate), { pcm: input.question, rate: input.rate });
  const long = { timeout: 120_000 };
  await page.waitForFunction(() => document.querySelector('[data-testid=user-message] p')?.textContent, null, long);
  const question = await page.evaluate(() => document.querySelector('[data-testid=user-message] p').textContent);
  // The answer is done when its text is whole and its audio played out
  // (heard) or was cut.
  await page.waitForFunction(() => {
    const a = window.__answerOf(document.querySelector('.turn'));
    return a && a.done && ['heard', 'cut'].includes(a.voice);
  }, null, long);
  const answer = await page.evaluate(() => window.__answerOf(document.querySelector('.turn')));
  const { asked, echoed } = await page.evaluate(() => ({ asked: window.__room.asked, echoed: window.__room.echoed }));
  return { question, answer, asked, echoed };
});
