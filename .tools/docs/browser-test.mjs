// Browser test of the gateway's /docs page, run by internal/docs's browser test (make test-docs):
// Debian's chromium, driven by playwright-core, opens the page of a running gateway and checks that
//   - every operation of the OpenAPI document the gateway serves has its section in the API reference,
//   - Redoc's search finds operations by their summary,
//   - every message of the AsyncAPI document (every event) is in the event catalog, with its headers,
//     payload and example, and the page says how to verify the signature,
//   - the pages made no request to any host but the gateway (any other is aborted and reported), and
//     raised no script error or Content-Security-Policy violation.
// The lists of operations and events are read from the documents, never written here. Screenshots
// go to ARTIFACTS_DIR.
//
// Usage: node browser-test.mjs BASE_URL ARTIFACTS_DIR
// Env:   CHROMIUM (default /usr/bin/chromium)
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { parse } from 'yaml';

const [base, artifacts] = process.argv.slice(2);
if (!base || !artifacts) {
  console.error('usage: node browser-test.mjs BASE_URL ARTIFACTS_DIR');
  process.exit(2);
}
const origin = new URL(base).origin;
mkdirSync(artifacts, { recursive: true });

const failures = [];
const fail = (msg) => { failures.push(msg); console.error('FAIL: ' + msg); };

async function document(path) {
  const res = await fetch(origin + path);
  if (!res.ok) throw new Error(`${path} answered ${res.status}`);
  return parse(await res.text());
}

const methods = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
const openapi = await document('/openapi.yaml');
const operations = [];
for (const [path, item] of Object.entries(openapi.paths ?? {})) {
  for (const m of methods) {
    if (!item[m]) continue;
    const op = item[m];
    if (!op.operationId) fail(`${m.toUpperCase()} ${path} has no operationId, so the reference has no stable anchor for it`);
    operations.push({ id: op.operationId, summary: op.summary ?? '', label: `${m.toUpperCase()} ${path}` });
  }
}
const asyncapi = await document('/asyncapi.yaml');
const events = Object.entries(asyncapi.components?.messages ?? {}).map(([key, msg]) => ({
  key, name: msg.name ?? key, headers: Boolean(msg.headers), examples: (msg.examples ?? []).length,
}));
if (operations.length === 0 || events.length === 0) {
  fail(`the documents list ${operations.length} operations and ${events.length} events`);
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--no-first-run'],
});
let exitCode = 0;
try {
  const context = await browser.newContext({ viewport: { width: 1600, height: 1000 } });
  // Every request of every page and worker passes here: the gateway's go through, any other is
  // recorded and aborted, so the test never depends on the network it checks for.
  const foreign = new Set();
  await context.route('**/*', (route) => {
    const url = route.request().url();
    if (new URL(url).origin === origin) return route.continue();
    foreign.add(url);
    return route.abort('blockedbyclient');
  });
  context.on('request', (req) => {
    const url = req.url();
    if (/^(data|blob):/.test(url)) return;
    if (new URL(url).origin !== origin) foreign.add(url);
  });
  const page = await context.newPage();
  page.on('pageerror', (err) => fail(`script error on ${page.url()}: ${err.message}`));
  page.on('console', (msg) => {
    if (msg.type() === 'error') fail(`console error on ${page.url()}: ${msg.text()}`);
  });

  // The API reference.
  const root = await page.goto(origin + '/');
  if (new URL(page.url()).pathname !== '/docs') fail(`/ led to ${page.url()}, not /docs`);
  if (!root || !root.ok()) fail(`/ → /docs answered ${root && root.status()}`);
  await page.waitForSelector('body[data-rendered]', { timeout: 90_000 });
  if (await page.getAttribute('body', 'data-rendered') !== 'ok') fail('Redoc reported an error rendering /openapi.yaml');
  const sections = await page.$$eval('[data-section-id]', (els) => els.map((e) => ({
    id: e.getAttribute('data-section-id'), title: (e.querySelector('h2')?.textContent ?? '').trim(),
  })));
  for (const op of operations) {
    const s = sections.find((x) => x.id.endsWith(`operation/${op.id}`));
    if (!s) fail(`API reference: no section for ${op.id} (${op.label})`);
    else if (op.summary && s.title !== op.summary) fail(`API reference: ${op.id} titled ${JSON.stringify(s.title)}, want ${JSON.stringify(op.summary)}`);
  }
  console.log(`API reference: ${operations.length} operations checked`);
  await page.screenshot({ path: join(artifacts, 'docs-reference.png') });

  // Search: the first, middle and last operation by id, looked up by their summary.
  const sorted = operations.filter((o) => o.id && o.summary).sort((a, b) => a.id.localeCompare(b.id));
  const probes = [...new Set([sorted[0], sorted[Math.floor(sorted.length / 2)], sorted[sorted.length - 1]])];
  const search = page.locator('input.search-input');
  for (const op of probes) {
    // Start from an empty result list, so a list left by the previous query cannot pass.
    await search.fill('');
    await page.waitForSelector('[data-role="search:results"]', { state: 'detached', timeout: 15_000 });
    await search.fill(op.summary);
    try {
      await page.locator(`[data-role="search:results"] li[data-item-id$="operation/${op.id}"]`).first().waitFor({ timeout: 15_000 });
      console.log(`search ${JSON.stringify(op.summary)}: lists ${op.id}`);
    } catch {
      const got = await page.$$eval('[data-role="search:results"] li[data-item-id]', (els) => els.map((e) => e.getAttribute('data-item-id')));
      fail(`search for ${JSON.stringify(op.summary)} lists ${JSON.stringify(got)}, not ${op.id}`);
    }
  }
  await page.screenshot({ path: join(artifacts, 'docs-search.png') });
  await search.fill('');

  // The event catalog.
  await page.click('nav.docs-nav a[href="/docs/events"]');
  await page.waitForSelector('body[data-rendered]', { timeout: 90_000 });
  if (await page.getAttribute('body', 'data-rendered') !== 'ok') fail('the event catalog reported an error rendering /asyncapi.yaml');
  for (const ev of events) {
    const sel = `#message-${ev.key}`;
    try {
      await page.waitForSelector(sel, { timeout: 30_000 });
    } catch {
      fail(`event catalog: no entry for ${ev.name} (${ev.key})`);
      continue;
    }
    const got = await page.$eval(sel, (el, key) => ({
      payload: Boolean(el.querySelector(`[id="message-${key}-payload"]`)),
      headers: Boolean(el.querySelector(`[id="message-${key}-headers"]`)),
    }), ev.key);
    if (!got.payload) fail(`event catalog: ${ev.name} shows no payload`);
    if (ev.headers && !got.headers) fail(`event catalog: ${ev.name} shows no headers`);
  }
  // The renderer puts examples beside the message, not inside it; every example is a whole envelope,
  // so each event's example is the block that names the event.
  const examples = await page.$$eval('.examples', (els) => els.map((e) => e.innerText));
  for (const ev of events) {
    if (ev.examples > 0 && !examples.some((t) => t.includes(`"event": "${ev.name}"`))) {
      fail(`event catalog: no example of ${ev.name}`);
    }
  }
  console.log(`event catalog: ${events.length} events checked`);
  const text = await page.innerText('body');
  for (const must of ['X-Svc-Signature', 'X-Svc-Timestamp', 'HMAC', 'X-Svc-Delivery']) {
    if (!text.includes(must)) fail(`event catalog: no mention of ${must} (how to verify the signature)`);
  }
  if (!(await page.$('#verify-signature'))) fail('event catalog: no "Verifying a delivery" section');
  await page.screenshot({ path: join(artifacts, 'docs-events.png') });
  const first = await page.$(`#message-${events[0].key}`);
  if (first) {
    await first.scrollIntoViewIfNeeded();
    await page.screenshot({ path: join(artifacts, 'docs-event.png') });
  }

  for (const url of foreign) fail(`request to another host: ${url}`);
  console.log(`screenshots in ${artifacts}`);
} finally {
  await browser.close();
}
if (failures.length > 0) {
  console.error(`${failures.length} failure(s)`);
  exitCode = 1;
}
process.exit(exitCode);
