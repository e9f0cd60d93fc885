// Browser test of the operator console (/console), run by internal/console's browser test (make
// test-console): Debian's chromium, driven by playwright-core, uses the console of a running gateway
// as a person would, and checks that
//   - a connection created in the console pairs while the test "scans" its QR code with the chat-app
//     simulator's control call, and the page says "connected" without a reload, driven by the event
//     stream (opened with a ticket; the list is then polled only every 30 s);
//   - a text sent from the form on each platform (chat app, official) shows as omnichat.message.sent
//     in a subscription's delivery log, and a redelivery shows its second attempt;
//   - a refused send (closed 24-hour window) is said in plain words;
//   - a token without webhook permissions sees the webhooks screen as not permitted;
//   - axe-core finds no serious or critical violation on any screen; the screens fit 360 px;
//   - no request leaves the gateway's origin, and there is no script error or CSP violation.
// Screenshots of every screen go to ARTIFACTS_DIR; with README_SHOTS=DIR two small ones go there too.
//
// Usage: node browser-test.mjs BASE_URL ARTIFACTS_DIR
// Env:   CHROMIUM, TOKEN, LIMITED_TOKEN, RECEIVER_URL, OFFICIAL_KEY, CONTACT_KEY, STRANGER_KEY, PROMO_PNG
import { mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const [base, artifacts] = process.argv.slice(2);
if (!base || !artifacts) {
  console.error('usage: node browser-test.mjs BASE_URL ARTIFACTS_DIR');
  process.exit(2);
}
const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set (browser_test.go sets it)`);
  return v;
};
const origin = new URL(base).origin;
const token = env('TOKEN');
const officialKey = env('OFFICIAL_KEY');
const contactKey = env('CONTACT_KEY');
const strangerKey = env('STRANGER_KEY');
const connKey = '5511988887777';
mkdirSync(artifacts, { recursive: true });
const readme = process.env.README_SHOTS || '';
const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

const failures = [];
const fail = (msg) => { failures.push(msg); console.error('FAIL: ' + msg); };
const step = (msg) => console.log('- ' + msg);

// The test's own calls (the "phone" and the simulator's world), never the page's.
async function gw(method, path, body) {
  const res = await fetch(origin + path, {
    method, headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json', Accept: 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
  return res.json();
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--no-first-run'],
});
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, timezoneId: 'America/Sao_Paulo', locale: 'en-GB' });
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin });
  const foreign = new Set();
  await context.route('**/*', (route) => {
    const url = route.request().url();
    if (/^(data|blob):/.test(url) || new URL(url).origin === origin) return route.continue();
    foreign.add(url);
    return route.abort('blockedbyclient');
  });
  context.on('request', (req) => {
    const url = req.url();
    if (!/^(data|blob):/.test(url) && new URL(url).origin !== origin) foreign.add(url);
  });
  // CSP violations, recorded by the browser itself (an init script runs outside the page's CSP).
  await context.addInitScript(() => {
    window.__csp = [];
    document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`));
  });
  const page = await context.newPage();
  // The event stream's answered requests (path and query), to see how the console opened it.
  const streamOpened = [];
  page.on('response', (r) => {
    const u = new URL(r.url());
    if (u.origin === origin && u.pathname === '/api/events/stream' && r.status() === 200) streamOpened.push(u.pathname + u.search);
  });
  // Refusals the test provokes on purpose: 409 (window closed), 400 (group), 403 (not permitted); 401 only
  // while it signs in with a wrong token.
  const expected = new Set([400, 403, 409]);
  page.on('pageerror', (err) => fail(`script error on ${page.url()}: ${err.message}`));
  page.on('console', (msg) => {
    if (msg.type() !== 'error') return;
    // Chromium logs every non-2xx answer as "Failed to load resource"; the refusals this test
    // provokes (409 window closed, 403 not permitted) are answers the console shows, not errors.
    const loc = msg.location().url || '';
    const m = /^Failed to load resource: the server responded with a status of (\d+)\b/.exec(msg.text());
    if (m && expected.has(Number(m[1])) && loc.startsWith(origin + '/api/')) return;
    fail(`console error on ${page.url()}: ${msg.text()} (${loc})`);
  });

  const screens = new Set();
  async function check(name) {
    screens.add(name);
    await page.screenshot({ path: join(artifacts, `${name}.png`), fullPage: true });
    if (!(await page.evaluate(() => typeof window.axe !== 'undefined'))) await page.evaluate(axeSource);
    const violations = await page.evaluate(async () => {
      const r = await window.axe.run(document, { resultTypes: ['violations'] });
      return r.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
        .map((v) => `${v.id} (${v.impact}): ${v.help} at ${v.nodes.map((n) => n.target.join(' ')).slice(0, 3).join(', ')}`);
    });
    for (const v of violations) fail(`axe on ${name}: ${v}`);
    step(`${name}: screenshot, axe ${violations.length === 0 ? 'clean' : violations.length + ' violation(s)'}`);
  }
  const nav = async (label, screen) => {
    await page.click(`header nav a:has-text("${label}")`);
    await page.waitForSelector(`main[data-screen="${screen}"] h1`);
  };

  // Sign-in.
  await page.goto(origin + '/console');
  await page.waitForSelector('input[name="token"]');
  await check('sign-in');
  await page.fill('input[name="token"]', 'not-a-token');
  expected.add(401);
  await page.click('button[type="submit"]');
  await page.waitForSelector('.signin .notice.error');
  expected.delete(401);
  await check('sign-in-refused');
  await page.fill('input[name="token"]', token);
  await page.click('button[type="submit"]');
  await page.waitForSelector('main[data-screen="connections"] h1');
  if ((await page.evaluate(() => location.href)).includes(token)) fail('the token is in the URL');
  if (await page.evaluate((t) => sessionStorage.getItem('gateway-console.token') !== t, token)) fail('the token is not in sessionStorage');
  if (await page.evaluate((t) => JSON.stringify(localStorage).includes(t) || document.cookie.includes(t), token)) fail('the token leaked to localStorage or a cookie');
  await page.getByText('No connection yet').waitFor();
  await check('connections-empty');

  // Create a connection and pair it. A marker on window proves the page was never reloaded.
  await page.evaluate(() => { window.__sameDocument = true; });
  await page.fill('form.inline input[name="name"]', 'Sales');
  await page.fill('form.inline input[name="key"]', connKey);
  await page.click('form.inline button[type="submit"]');
  const qr = page.locator('img.qr');
  await qr.waitFor();
  const box = await qr.boundingBox();
  if (!box || box.width < 250) fail(`the QR code is ${box && box.width} px wide, too small to scan`);
  if (!(await qr.getAttribute('src')).startsWith('data:image/png;base64,')) fail('the QR code is not the PNG the API answered');
  await check('pair-qr');
  if (readme) await page.locator('[data-testid="pair"]').screenshot({ path: join(readme, 'console-pair.png') });
  await page.click('button:has-text("Pair by phone code instead")');
  await page.waitForSelector('[data-testid="phone-code"]');
  await check('pair-phone-code');
  await Promise.all([
    page.waitForResponse((r) => r.url() === origin + '/api/chatapp-qrcode'),
    page.click('button:has-text("Show the QR code instead")'),
  ]);
  await qr.waitFor();
  // The code is replaced before it expires: the page asks for a new one while the first is valid.
  const first = await qr.getAttribute('src');
  const qrAsked = [];
  page.on('request', (req) => { if (req.url() === origin + '/api/chatapp-qrcode') qrAsked.push(Date.now()); });
  const expiresText = await qr.getAttribute('data-expires');
  await page.waitForFunction((src) => document.querySelector('img.qr')?.getAttribute('src') !== src, first, { timeout: 90_000 });
  const expires = Date.parse(expiresText);
  if (!(qrAsked.length > 0 && qrAsked[0] < expires)) fail(`the QR code was asked again at ${qrAsked[0]}, not before it expired at ${expiresText}`);
  step(`QR code replaced ${Math.round((expires - qrAsked[0]) / 1000)} s before it expired`);
  const conn = (await gw('GET', '/api/chatapps')).data.find((c) => c.key === connKey);
  if (!conn) throw new Error('the connection created in the console is not listed by the API');
  // The console follows the event stream, opened with a ticket (never the token) in its URL.
  await page.waitForSelector('[data-testid="live"][data-state="stream"]', { timeout: 15_000 });
  if (!streamOpened.some((u) => /^\/api\/events\/stream\?ticket=est_/.test(u))) fail(`the event stream was not opened with a ticket: ${streamOpened.join(', ')}`);
  step(`scanning connection ${conn.id} with the simulator`);
  await gw('POST', `/api/chatapp-simulator/${conn.id}/pair`);
  // Within half the 30 s poll the console keeps while the stream is open: the state change came on
  // the stream.
  await page.waitForSelector('[data-testid="paired"]', { timeout: 15_000 });
  if (!(await page.evaluate(() => window.__sameDocument === true))) fail('the page reloaded to show the pairing');
  await page.locator(`[data-connection="${connKey}"] [data-testid="state"]:has-text("Connected")`).waitFor();
  await check('pair-connected');

  // Contacts, groups and the number check, with what the simulated phone has.
  await gw('POST', `/api/chatapp-simulator/${conn.id}/contacts`, { contacts: [{ key: contactKey, name: 'Maria', on_chatapp: true }] });
  await gw('POST', `/api/chatapp-simulator/${conn.id}/groups`, { key: '120363025246125486', name: 'Team', is_admin: true });
  await page.click('button:has-text("Contacts and groups")');
  await page.getByText(`Maria — ${contactKey}`).waitFor();
  await page.getByText('Team — 120363025246125486').waitFor();
  await page.fill('.details textarea', `${contactKey} 5511900000000`);
  await page.click('.details button:has-text("Check")');
  await page.waitForSelector('[aria-label="Number check results"] li');
  await check('connection-details');
  await page.click('.details button:has-text("Close")');

  // Official channels: templates with components and variables; header media with its preview.
  await nav('Official channels', 'official');
  await page.waitForSelector('[data-template="order_update"]');
  await page.setInputFiles('.upload input[type="file"]', env('PROMO_PNG'));
  await page.waitForSelector('.preview img');
  await page.click('.upload button[type="submit"]');
  await page.getByText('Uploaded').waitFor();
  if (!(await page.locator('.upload').innerText()).includes('ago') && !(await page.locator('.upload').innerText()).match(/in (71|72) h/)) {
    fail('the upload does not say its 72-hour deadline');
  }
  await check('official-channels');

  // Webhooks: a subscription to the test's receiver; its secret is shown once.
  await nav('Webhooks', 'webhooks');
  await page.getByText('No subscription yet').waitFor();
  await check('webhooks-empty');
  await page.fill('form.inline input[name="name"]', 'Ops receiver');
  await page.fill('form.inline input[name="url"]', env('RECEIVER_URL'));
  await page.click('form.inline button[type="submit"]');
  await page.waitForSelector('[data-testid="secret"]');
  const secret = await page.locator('[data-testid="secret"] code').innerText();
  if (!/^whsec_[0-9a-f]{64}$/.test(secret)) fail(`the secret shown is ${JSON.stringify(secret)}`);
  await page.click('button:has-text("Copy secret")');
  if ((await page.evaluate(() => navigator.clipboard.readText())) !== secret) fail('Copy secret did not copy the secret');
  await check('webhooks-secret');
  await page.click('button:has-text("I have copied it")');

  // Send a text on each platform, and a refused one.
  await nav('Send', 'send');
  async function send(platform, sender, to, text) {
    await page.check(`input[name="platform"][value="${platform}"]`);
    await page.locator('select[name="sender"] option', { hasText: sender }).first().waitFor({ state: 'attached' });
    await page.selectOption('select[name="sender"]', sender);
    await page.fill('input[name="contact"]', to);
    await page.fill('textarea[name="text"]', text);
    const [res] = await Promise.all([
      page.waitForResponse((r) => r.url().startsWith(origin + '/api/api-send-message')),
      page.click('form.send button[type="submit"]'),
    ]);
    await page.waitForSelector('[data-testid="sent"], .notice.error');
    return res.status();
  }
  let status = await send('chatapp', connKey, contactKey, 'Hello from the console (chat app)');
  if (status !== 200) fail(`chat-app send answered ${status}`);
  await page.waitForSelector('[data-testid="sent"]');
  await check('send-chatapp');
  status = await send('ofc_chatapp', officialKey, contactKey, 'Hello from the console (official)');
  if (status !== 200) fail(`official send answered ${status}`);
  await page.waitForSelector('[data-testid="sent"]');
  // A group in announce mode where this number is not an administrator refuses it: 400, in words.
  await gw('POST', `/api/chatapp-simulator/${conn.id}/groups`, { key: '120363025246125999', name: 'Announcements', announce: true, is_admin: false });
  await page.check('input[name="group"]');
  status = await send('chatapp', connKey, '120363025246125999', 'Hello, group');
  await page.uncheck('input[name="group"]');
  if (status !== 400) fail(`a send to an announce-only group answered ${status}, want 400`);
  const groupRefusal = await page.locator('.notice.error').innerText();
  if (!groupRefusal.includes('administrators')) fail(`the 400 is shown as ${JSON.stringify(groupRefusal)}`);
  await check('send-refused-group');
  status = await send('ofc_chatapp', officialKey, strangerKey, 'Hello?');
  if (status !== 409) fail(`a send outside the window answered ${status}, want 409`);
  const refusal = await page.locator('.notice.error').innerText();
  if (!refusal.includes('24-hour window') || !refusal.includes('template')) fail(`the 409 is shown as ${JSON.stringify(refusal)}`);
  await check('send-refused');
  // As the refusal says: a template starts the conversation (its variables asked by name).
  await page.check('input[name="kind"][value="template"]');
  await page.selectOption('select[name="template"]', { label: 'order_update (pt_BR)' });
  await page.getByLabel('Value of {{1}}').fill('Ana');
  await page.getByLabel('Value of {{2}}').fill('#48213');
  let [res] = await Promise.all([
    page.waitForResponse((r) => r.url().startsWith(origin + '/api/api-send-message')),
    page.click('form.send button[type="submit"]'),
  ]);
  if (res.status() !== 200) fail(`the template send answered ${res.status()}`);
  await page.waitForSelector('[data-testid="sent"]');
  await check('send-template');
  // A file with its caption on the chat app (multipart).
  await page.check('input[name="platform"][value="chatapp"]');
  await page.selectOption('select[name="sender"]', connKey);
  await page.fill('input[name="contact"]', contactKey);
  await page.check('input[name="kind"][value="file"]');
  await page.setInputFiles('form.send input[name="file"]', env('PROMO_PNG'));
  await page.fill('textarea[name="text"]', 'The promotion');
  [res] = await Promise.all([
    page.waitForResponse((r) => r.url().startsWith(origin + '/api/api-send-message')),
    page.click('form.send button[type="submit"]'),
  ]);
  if (res.status() !== 200 || !(res.request().headers()['content-type'] || '').startsWith('multipart/form-data')) {
    fail(`the file send answered ${res.status()} (${res.request().headers()['content-type']})`);
  }
  await page.waitForSelector('[data-testid="sent"]');
  await page.check('input[name="kind"][value="text"]');

  // Conversations, with the time left in the official window.
  await nav('Conversations', 'conversations');
  const maria = page.locator(`[data-conversation="${contactKey}"] [data-testid="window"]`).first();
  await maria.waitFor();
  if (!/open.*left/s.test(await maria.innerText())) fail(`the window of the contact who wrote reads ${JSON.stringify(await maria.innerText())}`);
  const title = await page.locator(`[data-conversation="${contactKey}"] time`).first().getAttribute('title');
  if (!/UTC$/.test(title || '')) fail(`a time's hover text is ${JSON.stringify(title)}, not its UTC time`);
  await check('conversations');

  // The delivery log: the two sends' omnichat.message.sent, then a redelivery's second attempt.
  await nav('Webhooks', 'webhooks');
  await page.click('button:has-text("Delivery log")');
  await page.selectOption('[data-testid="delivery-log"] select[name="event"]', 'omnichat.message.sent');
  const sent = page.locator('li.attempt[data-event="omnichat.message.sent"][data-attempt="1"]');
  await page.waitForFunction(() => document.querySelectorAll('li.attempt[data-event="omnichat.message.sent"][data-attempt="1"]').length >= 2, null, { timeout: 60_000 });
  step(`delivery log: ${await sent.count()} omnichat.message.sent deliveries`);
  // browser_test.go ties these ids to the texts its receiver got.
  console.log(`logged omnichat.message.sent: ${(await sent.evaluateAll((els) => els.map((e) => e.getAttribute('data-delivery')))).join(',')}`);
  await check('delivery-log');
  const deliveryId = await sent.first().getAttribute('data-delivery');
  await sent.first().locator('button:has-text("Redeliver")').click();
  // A redelivery is new log entries under the same delivery id, its attempts counted from 1 again.
  await page.waitForSelector(`li.attempt[data-delivery="${deliveryId}"][data-sending="2"]`, { timeout: 60_000 });
  if (!(await page.locator(`li.attempt[data-delivery="${deliveryId}"][data-sending="2"]`).innerText()).includes('redelivery 1')) fail('the second sending is not marked as a redelivery');
  step(`redelivered ${deliveryId}: its second attempt is logged`);
  const since = await page.evaluate(() => {
    const d = new Date(Date.now() - 3600_000);
    const p = (n) => String(n).padStart(2, '0');
    return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}`;
  });
  await page.fill('input[name="since"]', since);
  await page.click('button:has-text("Recover")');
  await page.getByText('Nothing failed since then').waitFor();
  await check('delivery-log-redelivered');
  if (readme) {
    // The top of the log only (the newest attempts: the redelivery first), to keep the image small.
    const r = await page.locator('[data-testid="delivery-log"]').evaluate((el) => {
      const b = el.getBoundingClientRect();
      return { x: b.x + scrollX, y: b.y + scrollY, width: b.width, height: Math.min(b.height, 640) };
    });
    await page.screenshot({ path: join(readme, 'console-deliveries.png'), fullPage: true, clip: r });
  }

  // Disable: the card says why and how to re-enable; then enable again.
  await page.click('button:has-text("Disable")');
  await page.waitForSelector('[data-testid="disabled-why"]');
  await check('webhooks-disabled');
  await page.click('.card button:has-text("Enable")');
  await page.waitForSelector('[data-testid="disabled-why"]', { state: 'detached' });
  // Rotating the secret asks first, naming what changes.
  await page.click('button:has-text("Rotate secret")');
  await page.waitForSelector('dialog.confirm[open]');
  await check('webhooks-rotate-confirm');
  await page.click('dialog.confirm button:has-text("Rotate")');
  await page.waitForSelector('[data-testid="secret"]');
  if ((await page.locator('[data-testid="secret"] code').innerText()) === secret) fail('the rotated secret is the old one');

  // Keyboard: a screen reached by Tab and Enter puts the focus on its heading.
  await page.focus('header nav a[href="#/connections"]');
  await page.keyboard.press('Tab');
  await page.keyboard.press('Enter');
  await page.waitForSelector('main[data-screen="official"] h1');
  // The heading takes the focus in an effect, after the screen is painted: wait for it (bounded)
  // rather than look at once.
  const focused = await page.waitForFunction(() => document.activeElement && document.activeElement.id === 'screen-title', null, { timeout: 5000 })
    .then(() => true, () => false);
  if (!focused) fail('the opened screen does not take the focus');

  // 360 px wide: every screen fits without sideways scrolling.
  await page.setViewportSize({ width: 360, height: 780 });
  for (const [label, screen] of [['Connections', 'connections'], ['Official channels', 'official'], ['Conversations', 'conversations'], ['Send', 'send'], ['Webhooks', 'webhooks']]) {
    await nav(label, screen);
    await page.waitForTimeout(300);
    const wide = await page.evaluate(() => document.documentElement.scrollWidth);
    if (wide > 360) fail(`${screen} is ${wide} px wide at a 360 px viewport`);
    await page.screenshot({ path: join(artifacts, `narrow-${screen}.png`), fullPage: true });
  }
  await page.setViewportSize({ width: 1280, height: 900 });

  // Sign out forgets the token; a token without webhook permissions sees "not permitted".
  await page.click('button:has-text("Sign out")');
  await page.waitForSelector('input[name="token"]');
  if (await page.evaluate(() => sessionStorage.length !== 0)) fail('sign out left something in sessionStorage');
  await page.fill('input[name="token"]', env('LIMITED_TOKEN'));
  await page.click('button[type="submit"]');
  await page.waitForSelector('main h1');
  await nav('Webhooks', 'webhooks');
  await page.waitForSelector('[data-testid="not-permitted"]');
  if (await page.locator('.notice.error').count() > 0) fail('not permitted is shown as an error');
  await check('webhooks-not-permitted');
  // The stream needs channel_webhooks_view: without it the console says it polls, and shows no error.
  await nav('Connections', 'connections');
  await page.waitForResponse((r) => r.url() === origin + '/api/events/stream-tickets' && r.status() === 403, { timeout: 15_000 })
    .catch(() => {}); // asked already, before this wait began
  if ((await page.getAttribute('[data-testid="live"]', 'data-state')) !== 'polling') fail('a token that may not read the stream is shown as live');
  if (await page.locator('.notice.error').count() > 0) fail('the refused stream is shown as an error');

  const csp = await page.evaluate(() => window.__csp);
  for (const v of csp) fail(`CSP violation: ${v}`);
  for (const url of foreign) fail(`request to another host: ${url}`);
  console.log(`${screens.size} screens checked; screenshots in ${artifacts}`);
} catch (err) {
  fail(`stopped: ${err && err.stack ? err.stack : err}`);
} finally {
  await browser.close();
}
if (failures.length > 0) {
  console.error(`${failures.length} failure(s)`);
  process.exit(1);
}
console.log('ok');
