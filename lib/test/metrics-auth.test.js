// The services' metrics ports (#51): behind the metrics password where there is one (any local user reaches a
// loopback port), open where a service is run by hand without one.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createRegistry, serveMetrics } from '../src/metrics.js';

/** @param {string} password @param {(base: string) => Promise<void>} use */
async function withMetrics(password, use) {
  const server = await serveMetrics(createRegistry('probe'), 0, '127.0.0.1', password);
  try {
    await use(`http://127.0.0.1:${/** @type {import('node:net').AddressInfo} */ (server.address()).port}/metrics`);
  } finally {
    server.close();
  }
}

const basic = (/** @type {string} */ credentials) => ({
  authorization: `Basic ${Buffer.from(credentials).toString('base64')}`,
});

test('with a password: 401 without it, with another or for another user; the metrics with it', async () => {
  await withMetrics('s3cret', async (url) => {
    const refused = await fetch(url);
    assert.equal(refused.status, 401);
    assert.match(String(refused.headers.get('www-authenticate')), /^Basic/);
    assert.equal((await fetch(url, { headers: basic('metrics:wrong') })).status, 401);
    assert.equal((await fetch(url, { headers: basic('admin:s3cret') })).status, 401);
    const ok = await fetch(url, { headers: basic('metrics:s3cret') });
    assert.equal(ok.status, 200);
    assert.match(await ok.text(), /process_cpu_user_seconds_total/);
  });
});

test('without one (a service run by hand): open', async () => {
  await withMetrics('', async (url) => assert.equal((await fetch(url)).status, 200));
});
