// Drives the starter page (starter/page.jsx) in Chromium. Input (JSON on
// stdin): {url, room, scenario, question, answer, silentMs}. Scenarios:
//   levels  one user switches the toggle to full, off, then summary, asks
//           each time, reloads, and asks again;
//   two     two users in one room, full and summary, one asks;
//   silent  a user who says nothing, watched for silentMs;
//   voice   a user who asks by voice (Chromium's fake microphone plays
//           the question; chromiumArgs name the file).
// Output: per asked question the answer's text and the reasoning steps
// the page showed beside it, with a timeline of what the page showed.
import { run } from './browser.mjs';

// Recorded in the page: every change of the transcript, to tell live
// reasoning (steps shown, and growing, before the answer) from late.
const recorder = () => {
  window.__timeline = [];
  const snap = () => {
    const items = [...document.querySelectorAll('#transcript > li')].map((li) => ({
      answerId: li.dataset.answerId,
      kind: li.className,
      text: li.querySelector('.text')?.textContent ?? '',
      steps: [...li.querySelectorAll('.step')].map((s) => ({ index: Number(s.dataset.index), level: s.dataset.level, text: s.textContent })),
    }));
    const st = document.getElementById('status');
    window.__timeline.push({ at: performance.now(), agent: st?.dataset.agent, items });
    if (window.__timeline.length > 4000) window.__timeline.splice(0, 1000);
  };
  new MutationObserver(snap).observe(document, { subtree: true, childList: true, characterData: true, attributes: true });
};

async function open(newPage, input, identity, wait = true, mic = false) {
  const page = await newPage();
  await page.addInitScript(recorder);
  await page.goto(`${input.url}/?identity=${identity}&room=${input.room}${mic ? '&mic=1' : ''}`);
  if (wait) await listening(page);
  return page;
}

async function listening(page) {
  try {
    await page.waitForSelector('#status[data-agent="listening"]', { timeout: 45_000 });
  } catch (e) {
    const seen = await page.evaluate(() => window.__timeline.map((s) => s.agent).filter((a, i, all) => a !== all[i - 1]));
    const status = await page.$eval('#status', (s) => JSON.stringify(s.dataset));
    throw new Error(`the agent never showed listening: states ${seen.join(' → ')}, now ${status}`);
  }
}

async function choose(page, level) {
  await page.selectOption('#reasoning', level);
  await page.waitForSelector(`#reasoning[data-applied="${level}"]`, { timeout: 10_000 });
}

// ask types the question and waits for a new answer's whole transcript;
// it returns that answer as the page shows it, and the timeline.
async function ask(page, input) {
  const before = await answers(page);
  await page.fill('#chat', input.question);
  await page.click('button[type=submit]');
  return answered(page, before, input, 60_000);
}

const answers = (page) => page.$$eval('li.agentTranscript', (ls) => ls.map((l) => l.dataset.answerId));

// answered waits for an answer not in before to be whole.
async function answered(page, before, input, timeout) {
  const handle = await page.waitForFunction(([seen, answer]) => {
    const li = [...document.querySelectorAll('li.agentTranscript')].find((l) => l.dataset.answerId && !seen.includes(l.dataset.answerId));
    return li && li.querySelector('.text').textContent.trim() === answer ? li.dataset.answerId : null;
  }, [before, input.answer], { timeout });
  const answerId = await handle.jsonValue();
  return page.evaluate((id) => {
    const timeline = window.__timeline.map((s) => ({ at: s.at, items: s.items.filter((i) => i.answerId === id) }))
      .filter((s) => s.items.length > 0);
    const li = document.querySelector(`li[data-answer-id="${id}"].agentTranscript`);
    return {
      answerId: id,
      text: li.querySelector('.text').textContent,
      steps: [...li.querySelectorAll('.step')].map((s) => ({ index: Number(s.dataset.index), level: s.dataset.level, text: s.textContent })),
      timeline,
    };
  }, answerId);
}

run(async ({ input, newPage }) => {
  switch (input.scenario) {
    case 'levels': {
      const page = await open(newPage, input, 'ana');
      const out = {};
      for (const level of ['full', 'off', 'summary']) {
        await choose(page, level);
        out[level] = await ask(page, input);
      }
      await page.reload();
      await listening(page);
      out.reloadedToggle = await page.$eval('#reasoning', (s) => s.value);
      await page.waitForSelector(`#reasoning[data-applied="${out.reloadedToggle}"]`, { timeout: 10_000 });
      out.reloaded = await ask(page, input);
      return out;
    }
    case 'two': {
      const ana = await open(newPage, input, 'ana');
      const ben = await open(newPage, input, 'ben');
      await choose(ana, 'full');
      await choose(ben, 'summary');
      const asked = await ask(ana, input);
      const seen = await ben.waitForFunction((id) => {
        const li = document.querySelector(`li[data-answer-id="${id}"].agentTranscript`);
        return li && [...li.querySelectorAll('.step')].map((s) => ({ index: Number(s.dataset.index), level: s.dataset.level, text: s.textContent }));
      }, asked.answerId, { timeout: 60_000 });
      return { ana: asked, ben: { answerId: asked.answerId, steps: await seen.jsonValue() } };
    }
    case 'voice': {
      const page = await open(newPage, input, 'vic', true, true);
      await choose(page, 'full');
      const out = await answered(page, await answers(page), input, 90_000);
      out.heard = await page.$$eval('li.userTranscript .text', (ls) => ls.map((l) => l.textContent));
      return out;
    }
    case 'silent': {
      const page = await open(newPage, input, 'sam', false);
      const joined = Date.now();
      await page.waitForTimeout(input.silentMs);
      const status = await page.$eval('#status', (s) => ({ ...s.dataset }));
      const states = await page.evaluate(() => [...new Set(window.__timeline.map((s) => s.agent))]);
      return { status, states, watchedMs: Date.now() - joined };
    }
  }
  throw new Error(`unknown scenario ${input.scenario}`);
});
