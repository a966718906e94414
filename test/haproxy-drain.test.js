// haproxy alone, rendered from the same settings, in front of a stand-in service that drains as the Node
// services do (lib/src/health.js: its health check answers 404 while it still serves): haproxy's soft stop
// takes it out of the rotation at once, and a slow request already on it finishes there (a service marked
// down, as a hung one is, has what waits on it ended: test/chaos.test.js).
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, test } from 'node:test';
import { drainable } from '../lib/src/health.js';
import { startHaproxy } from './support/haproxy.js';
import { waitFor } from './support/ports.js';

let draining = false;
/** @type {Awaited<ReturnType<typeof startHaproxy>>} */
let haproxy;
let base = '';

before(async () => {
  /** @type {http.RequestListener} */
  const app = (req, res) => {
    const slow = /^\/slow\/(\d+)$/.exec(String(req.url));
    if (slow) setTimeout(() => res.writeHead(200).end('late'), Number(slow[1]));
    else res.writeHead(200).end(req.url === '/healthz' ? '{"ok":true}' : 'served');
  };
  haproxy = await startHaproxy(drainable(app, () => draining));
  base = haproxy.base;
});
after(() => haproxy?.stop());

test('a draining service (its check 404) gets no new requests, and a slow one already on it finishes', async () => {
  const slow = fetch(`${base}/slow/7000`).then(async (response) => ({
    status: response.status,
    body: await response.text(),
  }));
  await new Promise((resolve) => setTimeout(resolve, 200));
  draining = true;
  try {
    // out of the rotation at its next check: with the one server, haproxy's JSON 503
    await waitFor(async () => (await fetch(`${base}/p/new`)).status === 503, 6_000, 'no new requests');
    // a service marked down has the requests on it ended; one in soft stop lets them finish
    assert.deepEqual(await slow, { status: 200, body: 'late' });
  } finally {
    draining = false;
  }
  await waitFor(async () => (await fetch(`${base}/p/again`)).status === 200, 15_000, 'back once it answers 200');
});
