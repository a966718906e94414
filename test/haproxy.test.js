// haproxy alone, rendered from the same settings, in front of a stand-in origin that can be slow, silent
// or broken: the queue timeout, the server timeout and a bad answer each give the JSON error shape.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, test } from 'node:test';
import { startHaproxy } from './support/haproxy.js';

/** @type {Awaited<ReturnType<typeof startHaproxy>>} */
let haproxy;
let base = '';

before(async () => {
  /** @type {http.RequestListener} */
  const origin = (req, res) => {
    if (req.url === '/healthz') res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
    else if (req.url?.startsWith('/slow')) setTimeout(() => res.writeHead(200).end('late'), 2000);
    else if (req.url === '/garbage') req.socket.end('this is not HTTP at all\r\n\r\n');
    else if (req.url !== '/hang') res.writeHead(404).end(); // /hang: never answers
  };
  haproxy = await startHaproxy(origin, {
    HAPROXY_ORIGIN_MAXCONN: '1',
    HAPROXY_QUEUE_TIMEOUT_MS: '300',
    HAPROXY_SERVER_TIMEOUT_S: '3',
    REQUEST_TIMEOUT_S: '2',
  });
  base = haproxy.base;
});
after(() => haproxy?.stop());

/** @param {Response} response @param {number} status @param {string} name */
async function assertJsonError(response, status, name) {
  assert.equal(response.status, status);
  assert.equal(response.headers.get('content-type'), 'application/json');
  assert.equal(response.headers.get('cache-control'), 'no-store');
  assert.equal(response.headers.get('retry-after'), '5');
  assert.deepEqual(await response.json(), { error: { name, info: { layer: 'haproxy' } } });
}

test('past maxconn a request waits at most the queue timeout, then gets a JSON 503', async () => {
  const first = fetch(`${base}/slow-1`); // holds the one connection the server is allowed for 2 s
  await new Promise((resolve) => setTimeout(resolve, 100));
  const started = performance.now();
  const queued = await fetch(`${base}/slow-2`);
  const ms = performance.now() - started;
  await assertJsonError(queued, 503, 'service_unavailable');
  assert.ok(ms >= 250 && ms < 1800, `refused after ${ms} ms: the queue timeout (300 ms), not the slow answer`);
  assert.equal((await first).status, 200);
});

test('a service that does not answer within the server timeout is a JSON 504', async () => {
  const started = performance.now();
  await assertJsonError(await fetch(`${base}/hang`), 504, 'gateway_timeout');
  assert.ok(performance.now() - started >= 2900 && performance.now() - started < 15_000, 'at the server timeout (3 s)');
});

test('a service answering garbage is a JSON 502', async () => {
  await assertJsonError(await fetch(`${base}/garbage`), 502, 'bad_gateway');
});
