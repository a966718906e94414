// A takedown list URL whose answer trickles in without end (a host in trouble, a proxy in the way) must not
// hold its sync for good: the fetch has a deadline, and the next poll applies the list (real Redis, a stand-in
// list host).
import assert from 'node:assert/strict';
import http from 'node:http';
import { test } from 'node:test';
import { loadConfig } from '@stack/lib';
import { settings } from '../src/config.js';
import { createListSync } from '../src/takedown-sources.js';
import { createTakedownStore } from '../src/takedowns.js';
import { waitFor } from '../../test/support/ports.js';
import { startRedis } from '../../test/support/processes.js';

test('a list answer that trickles in is cut at its deadline, and the next poll applies the list', async (t) => {
  const redis = await startRedis();
  let asked = 0;
  const list = http.createServer((req, res) => {
    asked += 1;
    res.writeHead(200, { 'content-type': 'application/json' });
    if (asked > 1) return res.end(JSON.stringify({ domains: ['blocked.example'] }));
    // the first answer: a space every 100 ms, for two minutes (bounded, so an old sync fails the test, not
    // hangs it)
    res.write('{');
    let left = 1200;
    const timer = setInterval(() => (left-- > 0 ? res.write(' ') : res.end('}')), 100);
    res.on('close', () => clearInterval(timer));
  });
  await new Promise((resolve) => list.listen(0, '127.0.0.1', () => resolve(undefined)));
  const { port } = /** @type {import('node:net').AddressInfo} */ (list.address());
  const config = /** @type {import('@stack/lib/src/config-types.js').PurgeServiceConfig} */ (
    loadConfig(settings, { TAKEDOWN_LIST_URLS: `http://127.0.0.1:${port}/list.json`, TAKEDOWN_LIST_POLL_S: '1' })
  );
  const logger = /** @type {any} */ ({ warn() {}, debug() {}, error() {}, info() {} });
  const store = createTakedownStore({ redis: redis.client, config });
  const sync = createListSync({ store, config, logger });
  t.after(async () => {
    sync.stop();
    list.closeAllConnections();
    list.close();
    await redis.stop();
  });
  const started = Date.now();
  sync.start();
  await waitFor(
    async () => (await store.list()).some((entry) => entry.value === 'blocked.example'),
    20_000,
    'the list applied',
  );
  const took = Date.now() - started;
  assert.ok(took >= 4_000, `applied after ${took} ms: the first answer was cut at its deadline (5 s)`);
  assert.ok(asked >= 2);
});
