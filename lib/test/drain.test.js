// A Node service stopped by SIGTERM (a pod deleted, a rolling update): with SHUTDOWN_DRAIN_S it first keeps
// serving while its health checks answer 404 (haproxy's soft stop), so haproxy and a Service's endpoints leave it before it stops
// listening (#50: a deleted origin pod cost requests that haproxy still sent it).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { once } from 'node:events';
import { test } from 'node:test';

const script = `
  import { runService, sharedSettings, commonSettings } from '@stack/lib';
  await runService({
    name: 'probe',
    settings: [...sharedSettings, ...commonSettings('probe', 0, 0)],
    // /big: 4 MB, more than a Unix socket's buffers hold, so a slow reader leaves most of it in Node's queue
    build: async () => ({ app: (req, res) => res.end(req.url === '/big' ? Buffer.alloc(4 << 20, 97) : 'served') }),
  });
  console.log('ready');
`;

/** GET a path over the service's Unix socket. @param {string} socket @param {string} url */
function get(socket, url) {
  return new Promise((resolve, reject) => {
    http
      .get({ socketPath: socket, path: url, agent: false }, (res) => {
        let body = '';
        res.on('data', (chunk) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode, body }));
      })
      .on('error', reject);
  });
}

/** Starts the probe service with SHUTDOWN_DRAIN_S=drainS; calls use(socket, child). @param {number} drainS @param {(socket: string, child: import('node:child_process').ChildProcess) => Promise<void>} use */
async function withService(drainS, use) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'drain-'));
  const socket = path.join(dir, 'probe.sock');
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
    env: { ...process.env, LOG_LEVEL: 'silent', PROBE_SOCKET: socket, SHUTDOWN_DRAIN_S: String(drainS) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  try {
    await once(/** @type {import('node:stream').Readable} */ (child.stdout), 'data');
    await use(socket, child);
  } finally {
    child.kill('SIGKILL');
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

test('SIGTERM with a drain: health checks answer 404 at once, requests are served, then it exits 0', async () => {
  await withService(2, async (socket, child) => {
    assert.deepEqual(await get(socket, '/healthz'), { status: 200, body: 'served' });
    const exited = once(child, 'exit');
    const signalled = Date.now();
    child.kill('SIGTERM');
    await new Promise((resolve) => setTimeout(resolve, 300));
    const health = /** @type {{ status: number, body: string }} */ (await get(socket, '/healthz'));
    assert.equal(health.status, 404);
    assert.equal(JSON.parse(health.body).draining, true);
    assert.equal(/** @type {any} */ (await get(socket, '/.well-known/healthcheck.json?x=1')).status, 404);
    assert.deepEqual(await get(socket, '/p/anything'), { status: 200, body: 'served' });
    const [code] = await exited;
    assert.equal(code, 0);
    assert.ok(Date.now() - signalled >= 1900, `exited after ${Date.now() - signalled} ms, before its drain`);
  });
});

test('SIGTERM without a drain (one box): it stops listening at once and exits 0', async () => {
  await withService(0, async (socket, child) => {
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    const [code] = await exited;
    assert.equal(code, 0);
    await assert.rejects(get(socket, '/healthz'));
  });
});

test('a stop while a large response is still being read: the reader gets all of it, then the connection closes', async () => {
  await withService(0, async (socket, child) => {
    const reader = net.connect(socket);
    reader.write('GET /big HTTP/1.1\r\nHost: probe\r\n\r\n');
    reader.pause(); // a reader slower than the service: the body waits in Node's queue
    await new Promise((resolve) => setTimeout(resolve, 300));
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    await new Promise((resolve) => setTimeout(resolve, 300));
    let bytes = 0;
    reader.on('data', (chunk) => (bytes += chunk.length));
    const ended = once(reader, 'end');
    reader.resume();
    await ended;
    reader.end();
    const body = bytes - Buffer.byteLength('HTTP/1.1 200 OK\r\n');
    assert.ok(bytes > 4 << 20, `read ${bytes} bytes of a 4 MB answer (${body} past the status line)`);
    const [code] = await exited;
    assert.equal(code, 0);
  });
});
