// nginx writes its access and error logs itself: the launcher's rotator bounds them, and mtail, which
// reads the access log, counts every request across a rotation.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { metricValue } from './support/metrics.js';
import { waitFor } from './support/ports.js';
import { startStack } from './support/stack.js';

/** @type {Awaited<ReturnType<typeof startStack>>} */
let stack;

before(async () => {
  stack = await startStack({
    NGINX_LOG_MAX_BYTES: '16kb',
    NGINX_LOG_KEEP: '2',
    NGINX_LOG_CHECK_S: '1',
    NGINX_RATE_LIMIT: '100000',
    NGINX_RATE_BURST: '100000',
    VARNISH_MISS_LIMIT: '0',
  });
});
after(() => stack.stop());

test("nginx's logs are rotated past their size, the oldest dropped, and mtail loses no request across it", async () => {
  const log = path.join(stack.dir, 'logs', 'nginx-access.log');
  const mtail = `http://127.0.0.1:${stack.env.MTAIL_PORT}/metrics`;
  // this test's requests only (image route, 4xx): the launcher's health checks pass through nginx too
  const counted = () => metricValue(mtail, 'edge_requests_total', { route: 'image', status_class: '4xx' });
  const before = await counted();
  let sent = 0;
  // each access line is about 150 bytes: 16 KB is about 110 requests; send enough for several rotations
  for (let round = 0; round < 6; round += 1) {
    for (let i = 0; i < 80; i += 1) {
      await (await fetch(`${stack.base}/no-such-key-${round}-${i}`)).arrayBuffer();
      sent += 1;
    }
    await new Promise((resolve) => {
      setTimeout(resolve, 1200);
    });
  }
  await waitFor(async () => fs.existsSync(`${log}.2`), 30_000, 'two rotations');
  assert.equal(fs.existsSync(`${log}.3`), false, 'only NGINX_LOG_KEEP rotated files are kept');
  assert.ok(
    fs.statSync(log).size < 16 * 1024 + 100 * 150,
    `the live log stays near its bound (${fs.statSync(log).size} bytes)`,
  );
  // the last rotation done and nginx reopened (the rotator renames, then signals): only then does a new
  // request's line belong to the live file, whatever the timing of the rotator's checks
  await waitFor(async () => fs.statSync(log).size < 16 * 1024, 30_000, 'the live log under its bound');
  await new Promise((resolve) => {
    setTimeout(resolve, 2500);
  });
  await (await fetch(`${stack.base}/after-rotation`)).arrayBuffer();
  sent += 1;
  await waitFor(async () => (await counted()) - before >= sent, 30_000, `mtail to count all ${sent} requests`);
  assert.equal((await counted()) - before, sent, 'each request counted once');
  await waitFor(
    async () => fs.readFileSync(log, 'utf8').includes('after-rotation'),
    5000,
    'nginx writes to the new file after reopening',
  );
});
