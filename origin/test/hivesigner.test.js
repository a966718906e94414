// The Hivesigner check of an upload's access token against an API that misbehaves (a stand-in speaking its
// wire format): an answer that trickles in ends at the call's deadline as a 503, not when it stops.
import assert from 'node:assert/strict';
import http from 'node:http';
import { test } from 'node:test';
import { createHivesignerAuth } from '../src/uploads/hivesigner.js';

test('a Hivesigner answer that trickles in is a 503 at the deadline (undici times out only between chunks)', async (t) => {
  const api = http.createServer((req, res) => {
    req.resume();
    res.writeHead(200, { 'content-type': 'application/json' });
    // a space every 100 ms for 10 s (bounded: an old check fails this test, not hangs it)
    let left = 100;
    const timer = setInterval(() => (left-- > 0 ? res.write(' ') : res.end('{}')), 100);
    res.on('close', () => clearInterval(timer));
  });
  await new Promise((resolve) => api.listen(0, '127.0.0.1', () => resolve(undefined)));
  t.after(() => {
    api.closeAllConnections();
    api.close();
  });
  const { port } = /** @type {import('node:net').AddressInfo} */ (api.address());
  const check = createHivesignerAuth({ apiUrl: `http://127.0.0.1:${port}`, app: 'my.app', timeoutMs: 1000 });
  const token = Buffer.from(
    JSON.stringify({
      signed_message: { type: 'posting', app: 'my.app' },
      authors: ['alice'],
      timestamp: 1,
      signatures: ['1f'.padEnd(130, '0')],
    }),
  ).toString('base64url');
  const started = Date.now();
  await assert.rejects(
    check(token),
    (/** @type {any} */ err) => err.status === 503 && err.name === 'upstream_unavailable',
  );
  const took = Date.now() - started;
  assert.ok(took >= 900 && took < 5_000, `answered after ${took} ms`);
});
