// haproxy alone, rendered from the same settings, in front of a stand-in origin that can be slow, silent
// or broken: the queue timeout, the server timeout and a bad answer each give the JSON error shape.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { renderAll } from '../infra/render.js';
import { resolveSettings } from '../infra/resolve.js';
import { freePort, waitFor } from './support/ports.js';
import { startProcess } from './support/processes.js';

/** @type {http.Server} */
let origin;
/** @type {ReturnType<typeof startProcess>} */
let haproxy;
let dir = '';
let base = '';

before(async () => {
  origin = http.createServer((req, res) => {
    if (req.url === '/healthz') return res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
    if (req.url?.startsWith('/slow')) return setTimeout(() => res.writeHead(200).end('late'), 2000);
    if (req.url === '/hang') return undefined; // never answers
    if (req.url === '/garbage') return req.socket.end('this is not HTTP at all\r\n\r\n');
    return res.writeHead(404).end();
  });
  const originPort = await freePort();
  await new Promise((resolve) => origin.listen(originPort, '127.0.0.1', () => resolve(null)));
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'haproxy-'));
  const imagesPort = await freePort();
  const config = await resolveSettings({
    ENV_FILE: '/nonexistent',
    STACK_DIR: dir,
    // haproxy's behaviours on its TCP port (its socket is another bind of the same frontend)
    INTERNAL_SOCKETS: 'false',
    HAPROXY_IMAGES_PORT: String(imagesPort),
    HAPROXY_AVATARS_PORT: String(await freePort()),
    HAPROXY_STATS_PORT: String(await freePort()),
    HAPROXY_STATS_PASSWORD: 'x',
    ORIGIN_SERVERS: `127.0.0.1:${originPort}`,
    HAPROXY_ORIGIN_MAXCONN: '1',
    HAPROXY_QUEUE_TIMEOUT_MS: '300',
    HAPROXY_SERVER_TIMEOUT_S: '3',
    REQUEST_TIMEOUT_S: '2',
  });
  renderAll(config);
  haproxy = startProcess('haproxy', ['-db', '-f', path.join(dir, 'conf', 'haproxy.cfg')]);
  base = `http://127.0.0.1:${imagesPort}`;
  await waitFor(async () => (await fetch(`${base}/healthz`)).status === 200, 15_000, 'haproxy with its server up');
});
after(async () => {
  await haproxy?.stop();
  origin?.closeAllConnections();
  await new Promise((resolve) => origin?.close(resolve));
  fs.rmSync(dir, { recursive: true, force: true });
});

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
