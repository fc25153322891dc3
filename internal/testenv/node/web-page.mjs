// What the scripts that drive Alicia's web client share: the desktop
// window, how long a step may take, and joining as a person does.

export const desktop = { viewport: { width: 1280, height: 800 } };

export const timeout = 45_000;

export async function join(page, { url, key, name }) {
  await page.goto(`${url}/#key=${encodeURIComponent(key)}`);
  const nameBox = page.getByLabel('Your name');
  // A returning page joins by itself.
  await Promise.race([nameBox.waitFor({ timeout }), page.getByText('Connected').waitFor({ timeout })]);
  if (await nameBox.isVisible()) {
    await nameBox.fill(name);
    await page.getByRole('button', { name: 'Join' }).click();
  }
  await page.getByText('Connected', { exact: true }).waitFor({ timeout });
}

// installAnswerOf gives the page window.__answerOf(turn): what a turn's
// answer shows, its text and how far its audio got (data-voice: speaking,
// heard, cut).
export const installAnswerOf = () => {
  window.__answerOf = (t) => {
    const a = t?.querySelector('[data-testid=answer]');
    if (!a) return null;
    return {
      id: a.dataset.answerId,
      text: a.querySelector('[data-testid=answer-text]')?.textContent ?? '',
      done: a.dataset.done === 'true',
      voice: a.dataset.voice,
      interrupted: Boolean(a.querySelector('[data-testid=interrupted]')),
      stopped: a.textContent.includes('Stopped.'),
      failed: a.textContent.includes('This answer failed'),
      cutShort: Boolean(a.querySelector('[data-testid=cut-short]')),
    };
  };
};
