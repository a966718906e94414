// The Cloudflare purge target against a CDN API that misbehaves (a stand-in speaking its wire format): an
// answer without end fails the call within its bound, one that trickles in fails at the call's deadline, and
// neither holds the purge service's memory or its worker.
import assert from 'node:assert/strict';
import http from 'node:http';
import { test } from 'node:test';
import { createCloudflareTarget } from '../src/targets/cloudflare.js';

/**
 * A stand-in API whose purge answer is `answer(res)`. @param {(res: http.ServerResponse) => void} answer
 * @returns {Promise<{ base: string, close: () => void }>}
 */
async function api(answer) {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => answer(res));
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
  const { port } = /** @type {import('node:net').AddressInfo} */ (server.address());
  return {
    base: `http://127.0.0.1:${port}/client/v4`,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

/** @param {string} base @param {number} timeoutMs */
const target = (base, timeoutMs) =>
  createCloudflareTarget({ base, zone: 'z', token: 't', perCall: 30, callsPerSecond: 100, burst: 10, timeoutMs });

test('a purge answered without end fails past a megabyte, not at the timeout, its memory let go', async (t) => {
  const chunk = Buffer.alloc(64 * 1024, 'x');
  // 32 MB, endless as far as the purge is concerned (a bound on the stand-in, so that a target that reads it
  // whole fails this test instead of taking the machine's memory)
  const endless = await api((res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    let left = 512;
    const write = () => {
      while (left > 0 && res.write(chunk)) left -= 1;
      if (left <= 0) res.end();
    };
    res.on('drain', write);
    write();
  });
  t.after(endless.close);
  const started = Date.now();
  const before = process.memoryUsage().rss;
  await assert.rejects(target(endless.base, 60_000).purge(['https://img.example/a.jpg'], new Set()), /more than/);
  assert.ok(Date.now() - started < 10_000, `failed after ${Date.now() - started} ms`);
  assert.ok(process.memoryUsage().rss - before < 100 * 2 ** 20, 'no growth past the bound');
});

test(
  'a purge answer that trickles in fails at the call deadline (undici times out only between chunks)',
  { timeout: 15_000 },
  async (t) => {
    const drip = await api((res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      // a space every 50 ms for 10 s (bounded: a target without a deadline fails this test, not hangs)
      let left = 200;
      const timer = setInterval(() => (left-- > 0 ? res.write(' ') : res.end('{}')), 50);
      res.on('close', () => clearInterval(timer));
    });
    t.after(drip.close);
    const started = Date.now();
    await assert.rejects(target(drip.base, 1000).purge(['https://img.example/a.jpg'], new Set()));
    const took = Date.now() - started;
    assert.ok(took >= 900 && took < 8_000, `failed after ${took} ms`);
  },
);

test('a purge answered {"success": true} is done; one with success false fails with what it said', async (t) => {
  let success = true;
  const cloudflare = await api((res) =>
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ success, errors: [] })),
  );
  t.after(cloudflare.close);
  const done = new Set();
  await target(cloudflare.base, 5000).purge(['https://img.example/a.jpg'], done);
  assert.equal(done.size, 1);
  success = false;
  await assert.rejects(target(cloudflare.base, 5000).purge(['https://img.example/b.jpg'], new Set()), /success/);
});
