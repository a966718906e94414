// haproxy alone, rendered from the same settings, in front of a stand-in service that drains as the Node
// services do (lib/src/health.js: its health check answers 404 while it still serves): haproxy's soft stop
// takes it out of the rotation at once, and a slow request already on it finishes there; one that hangs
// instead is marked down and what waits on it is ended.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { renderAll } from '../infra/render.js';
import { resolveSettings } from '../infra/resolve.js';
import { drainable } from '../lib/src/health.js';
import { freePort, waitFor } from './support/ports.js';
import { startProcess } from './support/processes.js';

let draining = false;
/** @type {http.Server} */
let service;
/** @type {ReturnType<typeof startProcess>} */
let haproxy;
let dir = '';
let base = '';

before(async () => {
  /** @type {http.RequestListener} */
  const app = (req, res) => {
    const slow = /^\/slow\/(\d+)$/.exec(String(req.url));
    if (slow) setTimeout(() => res.writeHead(200).end('late'), Number(slow[1]));
    else res.writeHead(200).end(req.url === '/healthz' ? '{"ok":true}' : 'served');
  };
  service = http.createServer(drainable(app, () => draining));
  const port = await freePort();
  await new Promise((resolve) => service.listen(port, '127.0.0.1', () => resolve(null)));
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'haproxy-drain-'));
  const imagesPort = await freePort();
  const config = await resolveSettings({
    ENV_FILE: '/nonexistent',
    STACK_DIR: dir,
    INTERNAL_SOCKETS: 'false',
    HAPROXY_IMAGES_PORT: String(imagesPort),
    HAPROXY_AVATARS_PORT: String(await freePort()),
    HAPROXY_STATS_PORT: String(await freePort()),
    HAPROXY_STATS_PASSWORD: 'x',
    ORIGIN_SERVERS: `127.0.0.1:${port}`,
  });
  renderAll(config);
  haproxy = startProcess('haproxy', ['-db', '-f', path.join(dir, 'conf', 'haproxy.cfg')]);
  base = `http://127.0.0.1:${imagesPort}`;
  await waitFor(async () => (await fetch(`${base}/p/x`)).status === 200, 15_000, 'haproxy with its server up');
});
after(async () => {
  await haproxy?.stop();
  service?.closeAllConnections();
  await new Promise((resolve) => service?.close(resolve));
  fs.rmSync(dir, { recursive: true, force: true });
});

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
