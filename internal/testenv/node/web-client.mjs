// Drives Alicia's web client (served by alicia serve at /) in Chromium as
// a person would: join with a name, pick a show-reasoning mode, type,
// stop, regenerate, reload, lose the connection. input.scenario picks the
// flow; the result carries what the page showed over time and the page's
// data-channel capture, which the Go test checks.
import { run, captured, screenshot } from './browser.mjs';
import { desktop, installAnswerOf, join, timeout } from './web-page.mjs';

const phone = { viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true };

async function setMode(page, mode) {
  const before = await page.evaluate(() => window.alicia.stats.received[12] || 0);
  await page.getByLabel('Show reasoning').selectOption(mode);
  // The server's reply to the settings update confirms the mode.
  await page.waitForFunction((n) => (window.alicia.stats.received[12] || 0) > n, before, { timeout });
}

// record keeps a timeline of what the page shows for the latest answer,
// one entry per DOM change: the steps, whether the reasoning panel is open
// and how much answer text there is.
async function record(page) {
  await page.evaluate(() => {
    window.__timeline = [];
    const snap = () => {
      const answers = document.querySelectorAll('[data-testid=answer]');
      const a = answers[answers.length - 1];
      if (!a) return;
      const panel = a.querySelector('[data-testid=reasoning]');
      window.__timeline.push({
        at: performance.now(),
        open: panel ? panel.open : null,
        steps: [...a.querySelectorAll('[data-testid=step]')].map((s) => ({
          index: Number(s.dataset.stepIndex),
          text: s.querySelector('.step-text').textContent,
          partial: s.classList.contains('partial'),
        })),
        text: a.querySelector('[data-testid=answer-text]')?.textContent ?? '',
        // Where the answer's text starts within the conversation: it must
        // not move while the answer streams.
        top: a.querySelector('[data-testid=answer-text]')?.getBoundingClientRect().top + document.querySelector('.turns').scrollTop,
        done: a.dataset.done === 'true',
      });
    };
    new MutationObserver(snap).observe(document.querySelector('.turns'), { subtree: true, childList: true, characterData: true, attributes: true });
  });
}

async function ask(page, text) {
  const box = page.getByLabel('Message');
  await box.fill(text);
  await box.press('Enter');
}

async function lastAnswer(page) {
  return page.evaluate(() => {
    const answers = document.querySelectorAll('[data-testid=answer]');
    const a = answers[answers.length - 1];
    if (!a) return null;
    const panel = a.querySelector('[data-testid=reasoning]');
    return {
      id: a.dataset.answerId,
      text: a.querySelector('[data-testid=answer-text]')?.textContent ?? '',
      done: a.dataset.done === 'true',
      open: panel ? panel.open : null,
      steps: [...a.querySelectorAll('[data-testid=step]')].map((s) => {
        const t = s.querySelector('.step-text');
        const lh = parseFloat(getComputedStyle(t).lineHeight);
        return { index: Number(s.dataset.stepIndex), text: t.textContent, lines: Math.round(t.getBoundingClientRect().height / lh) };
      }),
      stopped: a.textContent.includes('Stopped.'),
      failed: a.textContent.includes('This answer failed'),
    };
  });
}

async function answered(page, n) {
  await page.waitForFunction(
    (n) => {
      const answers = document.querySelectorAll('[data-testid=answer]');
      return answers.length >= n && answers[answers.length - 1].dataset.done === 'true';
    },
    n,
    { timeout },
  );
  return lastAnswer(page);
}

// stopped waits for the n-th answer to show the server's word that it was
// stopped: the answer closes with its final sentence, and the
// acknowledgement of the stop follows it. On a timeout the answer is
// returned as shown, for the test to say what it lacks.
async function stopped(page, n) {
  await answered(page, n);
  await page.waitForFunction(
    () => [...document.querySelectorAll('[data-testid=answer]')].at(-1).textContent.includes('Stopped.'),
    null,
    { timeout },
  ).catch(() => {});
  return lastAnswer(page);
}

const scenarios = {
  // A typed question: steps fill the open panel, then sentences, then the
  // panel closes. Screenshots of both layouts.
  async answer({ input, newPage }) {
    const page = await newPage(desktop);
    await join(page, input);
    await setMode(page, 'full');
    await record(page);
    await ask(page, input.question);
    await page.locator('[data-testid=step]').first().waitFor({ timeout });
    const thinkingShot = await screenshot(page, 'desktop-thinking');
    const final = await answered(page, 1);
    const timeline = await page.evaluate(() => window.__timeline);
    const doneShot = await screenshot(page, 'desktop-answered');
    // Opened again by the reader, with the keyboard.
    await page.locator('[data-testid=reasoning] summary').last().focus();
    await page.keyboard.press('Enter');
    const reopened = (await lastAnswer(page)).open;
    const openShot = await screenshot(page, 'desktop-reasoning-open');
    const packets = await captured(page);
    const storageState = await page.context().storageState();
    await page.close();

    // The same conversation reopened on a phone-sized screen (the page's
    // local storage carried over, as a reload would): earlier turns load
    // from the history endpoint.
    const small = await newPage({ ...phone, storageState });
    await join(small, input);
    await small.locator('[data-testid=answer-text]').first().waitFor({ timeout });
    const phoneHistory = await lastAnswer(small);
    const phoneShot = await screenshot(small, 'phone-history');
    await record(small);
    await ask(small, input.question2);
    await small.locator('[data-testid=step]').last().waitFor({ timeout });
    await answered(small, 2);
    const phoneAnsweredShot = await screenshot(small, 'phone-answered');
    const overflow = await small.evaluate(() => document.documentElement.scrollWidth > window.innerWidth);
    return { final, timeline, reopened, packets, phoneHistory, overflow, shots: [thinkingShot, doneShot, openShot, phoneShot, phoneAnsweredShot] };
  },

  // Off is remembered by the server: after a reload, and on another
  // device of the same user; then summary shows one line per step.
  async preference({ input, newPage }) {
    const page = await newPage(desktop);
    await join(page, input);
    await setMode(page, 'off');
    await page.reload();
    await join(page, input);
    const afterReload = await page.getByLabel('Show reasoning').inputValue();
    await ask(page, input.question);
    const offAnswer = await answered(page, 1);
    const offPackets = await captured(page);

    // Another device: no local storage of its own, the same name.
    const other = await newPage(desktop);
    await other.goto(`${input.url}/#key=${encodeURIComponent(input.key)}`);
    await other.getByLabel('Your name').fill(input.name);
    await other.getByRole('button', { name: 'Join' }).click();
    await other.getByText('Connected', { exact: true }).waitFor({ timeout });
    const otherDevice = await other.getByLabel('Show reasoning').inputValue();

    await setMode(other, 'summary');
    await ask(other, input.question);
    const summaryAnswer = await answered(other, 1);
    await other.locator('[data-testid=reasoning] summary').last().click();
    const summaryShot = await screenshot(other, 'desktop-summary');
    const summaryPackets = await captured(other);
    return { afterReload, offAnswer, offPackets, otherDevice, summaryAnswer, summaryPackets, shots: [summaryShot] };
  },

  // Stop while it thinks, stop while it answers; then regenerate and page
  // through the answers.
  async controls({ input, newPage }) {
    const page = await newPage(desktop);
    // Alicia muted: a new turn (the next question, a regeneration) cuts
    // the answer being spoken, and the page then shows it as heard, at a
    // word that depends on timing. The voice scenario covers that.
    await page.addInitScript(() => localStorage.setItem('alicia.speaker', 'false'));
    await join(page, input);
    await setMode(page, 'full');

    await ask(page, input.thinksLong);
    await page.locator('[data-testid=step]').first().waitFor({ timeout });
    await page.getByRole('button', { name: 'Stop' }).click();
    const stoppedThinking = await stopped(page, 1);

    await ask(page, input.long);
    await page.waitForFunction(() => {
      const a = [...document.querySelectorAll('[data-testid=answer]')].at(-1);
      return a && a.querySelector('[data-testid=answer-text]')?.textContent.length > 0 && a.dataset.done !== 'true';
    }, null, { timeout });
    // Escape stops too: the keyboard path.
    await page.getByLabel('Message').focus();
    await page.keyboard.press('Escape');
    const stoppedAnswering = await stopped(page, 2);
    const stopShot = await screenshot(page, 'desktop-stopped');

    // A barrier: a new question answered in full means nothing more of
    // the stopped answer is on its way.
    await ask(page, input.question);
    const third = await answered(page, 3);
    const stoppedLater = await page.evaluate(
      (id) => document.querySelector(`[data-answer-id="${id}"] [data-testid=answer-text]`)?.textContent ?? '',
      stoppedAnswering.id,
    );

    await page.getByRole('button', { name: 'Regenerate' }).click();
    await page.getByTestId('variant-position').waitFor({ timeout });
    const regenerated = await answered(page, 3);
    const position = await page.getByTestId('variant-position').textContent();
    await page.getByRole('button', { name: 'Previous answer' }).click();
    const previous = await lastAnswer(page);
    const previousPosition = await page.getByTestId('variant-position').textContent();
    const variantShot = await screenshot(page, 'desktop-variants');
    await page.getByRole('button', { name: 'Next answer' }).click();
    const next = await lastAnswer(page);
    return { stoppedThinking, stoppedAnswering, stoppedLater, third, regenerated, position, previous, previousPosition, next, packets: await captured(page), shots: [stopShot, variantShot] };
  },

  // The microphone button publishes a microphone track and mutes it; the
  // speaker button tells the server whether to speak; a failing model is
  // reported in plain words.
  async extras({ input, newPage }) {
    const page = await newPage(desktop);
    await join(page, input);
    await page.getByRole('button', { name: 'Talk' }).click();
    const mic = page.getByRole('button', { name: 'Mute microphone' });
    await mic.waitFor({ timeout });
    const micPressed = await mic.getAttribute('aria-pressed');
    await page.waitForFunction(() => window.alicia.room.localParticipant.getTrackPublication('microphone')?.trackSid, null, { timeout });
    const micTrack = await page.evaluate(() => window.alicia.room.localParticipant.getTrackPublication('microphone').trackSid);
    const micShot = await screenshot(page, 'desktop-microphone');
    await mic.click();
    const talk = page.getByRole('button', { name: 'Talk' });
    await talk.waitFor({ timeout });
    const micMuted = await talk.getAttribute('aria-pressed');
    await setMode(page, 'full');
    await page.getByRole('button', { name: 'Mute Alicia' }).click();
    await page.getByRole('button', { name: 'Unmute Alicia' }).waitFor({ timeout });

    await ask(page, input.failing);
    const error = await page.getByTestId('error').first();
    await error.waitFor({ timeout });
    const failed = await answered(page, 1);
    const errorShot = await screenshot(page, 'desktop-error');
    return { micPressed, micTrack, micMuted, error: await error.textContent(), failed, packets: await captured(page), shots: [micShot, errorShot] };
  },

  // Chromium's fake microphone plays a file (the Go test builds it): a
  // question, a pause in which Alicia answers aloud, then an
  // interruption, and a hum over the answer to it. The page's audio is
  // sampled every 20 ms with WebAudio analysers on its microphone track
  // and on the track it receives from Alicia, alongside the bot's
  // lk.agent.state and whether the first answer shows its interruption.
  async voice({ input, newPage }) {
    const page = await newPage(desktop);
    await join(page, input);
    await page.evaluate(() => {
      const ctx = new AudioContext();
      ctx.resume();
      const taps = new Map(); // MediaStreamTrack id → analyser
      const level = (mst) => {
        if (!mst) return 0;
        let a = taps.get(mst.id);
        if (!a) {
          a = ctx.createAnalyser();
          a.fftSize = 1024;
          ctx.createMediaStreamSource(new MediaStream([mst])).connect(a);
          a.buf = new Float32Array(a.fftSize);
          taps.set(mst.id, a);
        }
        a.getFloatTimeDomainData(a.buf);
        let sum = 0;
        for (const v of a.buf) sum += v * v;
        return Math.sqrt(sum / a.buf.length);
      };
      window.__samples = [];
      window.__captions = [];
      const room = window.alicia.room;
      window.__sampler = setInterval(() => {
        const mine = room.localParticipant.getTrackPublication('microphone')?.track?.mediaStreamTrack;
        let remote = null;
        let state = '';
        for (const p of room.remoteParticipants.values()) {
          for (const pub of p.audioTrackPublications.values()) {
            if (pub.track) {
              remote = pub.track.mediaStreamTrack;
              state = p.attributes['lk.agent.state'] || '';
            }
          }
        }
        // What the first turn shows: its reasoning steps and answer so far.
        const turn = document.querySelector('.turn');
        const steps = turn ? turn.querySelectorAll('[data-testid=step]').length : 0;
        const answer = turn?.querySelector('[data-testid=answer-text]')?.textContent.length ?? 0;
        const cut = Boolean(turn?.querySelector('[data-testid=interrupted]'));
        window.__samples.push({ at: performance.now(), mic: level(mine), remote: level(remote), state, steps, answer, cut });
      }, 20);
      const caption = document.querySelector('.caption');
      new MutationObserver(() => {
        const t = caption.textContent;
        if (t && window.__captions.at(-1) !== t) window.__captions.push(t);
      }).observe(caption, { subtree: true, childList: true, characterData: true });
    });
    await page.getByRole('button', { name: 'Talk' }).click();
    const long = { timeout: 90_000 };
    // The question's transcription becomes the first user message.
    await page.waitForFunction(() => document.querySelector('[data-testid=user-message] p')?.textContent, null, long);
    // Alicia's answer is heard in the page; the screenshot is taken a
    // second into it, with the visualiser moving.
    await page.waitForFunction(() => {
      const first = window.__samples.find((s) => s.remote > 0.01);
      return first && window.__samples.some((s) => s.remote > 0.01 && s.at > first.at + 1000);
    }, null, long);
    const speakingShot = await screenshot(page, 'desktop-voice-speaking');
    // What a turn's answer shows, read the same way live and after the
    // reload.
    await page.addInitScript(installAnswerOf);
    await page.evaluate(installAnswerOf);
    // Spoken over, the answer shows at once where its audio stopped: read
    // as it is then, long before any reload.
    const cut = await page.waitForFunction(() => {
      const a = window.__answerOf(document.querySelector('.turn'));
      return a?.voice === 'cut' && a;
    }, null, long).then((h) => h.jsonValue(), async (e) => {
      const shown = await page.evaluate(() => window.__answerOf(document.querySelector('.turn')));
      throw new Error(`the answer spoken over never showed as cut; the page shows ${JSON.stringify(shown)}: ${e.message}`);
    });
    const cutShot = await screenshot(page, 'desktop-voice-cut');
    // The interruption is the second user message, answered in turn; the
    // hum falls on that answer, whose audio then ends, heard to its end
    // (or cut, which the Go test reports).
    await page.waitForFunction(() => {
      const turns = document.querySelectorAll('.turn');
      const second = turns[1]?.querySelector('[data-testid=answer]');
      return second?.dataset.done === 'true' && ['heard', 'cut'].includes(second.dataset.voice)
        && turns[0].querySelector('[data-testid=answer]')?.dataset.done === 'true';
    }, null, long).catch(async (e) => {
      // What the page showed instead, and when Alicia was last heard.
      const shown = await page.evaluate(() => ({
        turns: [...document.querySelectorAll('.turn')].map((t) => ({
          user: t.querySelector('[data-testid=user-message] p')?.textContent, answer: window.__answerOf(t),
        })),
        lastHeard: window.__samples.findLast((x) => x.remote > 0.01)?.at,
        lastMic: window.__samples.findLast((x) => x.mic > 0.01)?.at,
        now: performance.now(),
        state: window.__samples.at(-1)?.state,
        captions: window.__captions,
      }));
      throw new Error(`the interruption's answer never ended; the page shows ${JSON.stringify(shown)}: ${e.message}`);
    });
    const doneShot = await screenshot(page, 'desktop-voice-interrupted');
    const turnsNow = () => page.evaluate(() => {
      const turns = [...document.querySelectorAll('.turn')];
      const answer = window.__answerOf;
      return {
        question: turns[0].querySelector('[data-testid=user-message] p').textContent,
        interruption: turns[1].querySelector('[data-testid=user-message] p').textContent,
        first: answer(turns[0]),
        second: answer(turns[1]),
      };
    });
    await page.evaluate(() => clearInterval(window.__sampler));
    const live = await turnsNow();
    const { samples, captions } = await page.evaluate(() => ({ samples: window.__samples, captions: window.__captions }));
    // Reopened, the page shows the answer as the server stored it: what
    // was heard before the interruption.
    await page.reload();
    await page.getByText('Connected', { exact: true }).waitFor({ timeout });
    await page.waitForFunction(() => document.querySelectorAll('.turn [data-testid=answer]').length >= 2, null, { timeout });
    const reopened = await turnsNow();
    const reopenedShot = await screenshot(page, 'desktop-voice-reopened');
    return { ...live, cut, reopened, captions, samples, shots: [speakingShot, cutShot, doneShot, reopenedShot] };
  },

  // The page loses its connection mid-answer (no network for a while,
  // then LiveKit's full reconnect) and the answer still completes once,
  // in order.
  async reconnect({ input, newPage, browser }) {
    const page = await newPage(desktop);
    await join(page, input);
    await setMode(page, 'full');
    await ask(page, input.long);
    await page.waitForFunction(() => {
      const a = [...document.querySelectorAll('[data-testid=answer]')].at(-1);
      return a && a.querySelector('[data-testid=answer-text]')?.textContent.length > 0;
    }, null, { timeout });
    const before = await lastAnswer(page);
    await page.context().setOffline(true);
    await page.evaluate(() => window.alicia.room.simulateScenario('full-reconnect'));
    await page.getByText('Connection lost, reconnecting…').waitFor({ timeout });
    const dropShot = await screenshot(page, 'desktop-reconnecting');
    await page.waitForTimeout(input.offlineMs);
    await page.context().setOffline(false);
    await page.getByText('Connected', { exact: true }).waitFor({ timeout });
    const final = await answered(page, 1);
    const sentences = await page.evaluate(() => {
      const t = window.alicia.state.turns.at(-1);
      return t.attempts.map((a) => Object.entries(a.sentences).map(([k, v]) => [Number(k), v]));
    });

    // A short drop that LiveKit resumes (same participant, ICE restart):
    // what arrives live and again by replay is shown once.
    await ask(page, input.long);
    await page.waitForFunction(() => {
      const a = [...document.querySelectorAll('[data-testid=answer]')].at(-1);
      return a && a.dataset.answerId && a.querySelector('[data-testid=answer-text]')?.textContent.length > 0 && a.dataset.done !== 'true';
    }, null, { timeout });
    await page.evaluate(() => window.alicia.room.simulateScenario('resume-reconnect'));
    const resumed = await answered(page, 2);
    return { before, final, sentences, resumed, pageStats: await page.evaluate(() => window.alicia.stats), packets: await captured(page), shots: [dropShot] };
  },

  // The process serving the conversation is killed while the long answer
  // streams (the page says when to input.signal) and another takes the
  // conversation over: the answer ends on the page as cut short, and the
  // next question is answered.
  async takeover({ input, newPage }) {
    const page = await newPage(desktop);
    await page.addInitScript(installAnswerOf);
    await join(page, input);
    await ask(page, input.long);
    const last = () => window.__answerOf([...document.querySelectorAll('.turn')].at(-1));
    await page.waitForFunction(`(${last})()?.text.length > 0`, null, { timeout });
    await fetch(input.signal, { method: 'POST' });
    const killed = await page.waitForFunction(`(() => { const a = (${last})(); return a?.done && a; })()`, null, { timeout: 90_000 })
      .then((h) => h.jsonValue(), async (e) => {
        throw new Error(`the killed answer never ended on the page, which shows ${JSON.stringify(await page.evaluate(last))}: ${e.message}`);
      });
    await ask(page, input.question);
    const next = await page.waitForFunction(`(() => {
      const turns = document.querySelectorAll('.turn');
      const a = turns.length >= 2 && window.__answerOf(turns[turns.length - 1]);
      return a?.done && a.text && a;
    })()`, null, { timeout }).then((h) => h.jsonValue());
    return { killed, next };
  },
};

run(async (ctx) => {
  const scenario = scenarios[ctx.input.scenario];
  if (!scenario) throw new Error(`unknown scenario ${ctx.input.scenario}`);
  return scenario(ctx);
});
