// Uploads stored before scrubbing existed (#39): ./infra/stack scrub-store on a store of 1,000 phone
// photographs, interrupted and run again: every one scrubbed once, a third run changes nothing, and an
// original cached at the edge answers the scrubbed bytes afterwards (purged through the purge service).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import sharp from 'sharp';
import { personalTags, photo, readMetadata, withMetadata } from './support/images.js';
import { waitFor } from './support/ports.js';
import { root } from './support/processes.js';
import { startStack } from './support/stack.js';

/** @type {Awaited<ReturnType<typeof startStack>>} */
let stack;
before(async () => {
  stack = await startStack({
    UPLOAD_TOKENS: 'scrub',
    UPLOAD_METADATA: 'none',
    NGINX_RATE_LIMIT: '100000',
    NGINX_RATE_BURST: '100000',
    // the uploads go four at once from one address, the default's very limit: nginx frees an upload's place
    // as its request ends, and the next four can arrive first (a 429 in CI beside the fresh-machine stage)
    NGINX_UPLOADS_PER_CLIENT: '16',
    VARNISH_MISS_LIMIT: '0',
  });
});
after(() => stack?.stop());

/** ./infra/stack scrub-store against the stack, UPLOAD_METADATA=location; `stopAfter`: SIGKILL once that many are done. @param {number} [stopAfter] */
function scrubStore(stopAfter) {
  // a group of its own: the interruption kills the launcher and the node process it started
  const child = spawn(path.join(root, 'infra/stack'), ['scrub-store', '--concurrency', '4'], {
    cwd: root,
    env: { ...process.env, ...stack.env, UPLOAD_METADATA: 'location' },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => {
    stdout += chunk;
  });
  child.stderr.on('data', (chunk) => {
    stderr += chunk;
  });
  const records = () =>
    fs
      .readdirSync(path.join(stack.dir, 'data', 'origin', 'uploads'), { recursive: true })
      .filter((name) => String(name).endsWith('.json')).length;
  const watcher = stopAfter
    ? setInterval(() => {
        if (records() >= stopAfter) process.kill(-(/** @type {number} */ (child.pid)), 'SIGKILL');
      }, 50)
    : null;
  return new Promise((resolve) =>
    child.on('exit', (code, signal) => {
      if (watcher) clearInterval(watcher);
      resolve({
        code,
        signal,
        result: stdout.trim() ? JSON.parse(stdout.trim().split('\n').pop() || '{}') : null,
        stderr,
        records: records(),
      });
    }),
  );
}

test(
  'scrub-store: 1,000 stored phone photographs scrubbed once across an interruption; a cached original answers the scrubbed bytes',
  { timeout: 900_000 },
  async () => {
    const phone = withMetadata(
      await sharp(photo('Path', '1280x800')).resize(160).jpeg({ quality: 80 }).toBuffer(),
      'jpg',
    );
    /** @type {string[]} */
    const urls = [];
    /** @param {number} i */
    const upload = async (i) => {
      // a comment after SOI makes each file (and its key) distinct, its metadata the phone's
      const comment = Buffer.from(`upload ${i}`);
      const marker = Buffer.from([0xff, 0xfe, 0, comment.length + 2]);
      const bytes = Buffer.concat([phone.subarray(0, 2), marker, comment, phone.subarray(2)]);
      const form = new FormData();
      form.append('image_file', new Blob([new Uint8Array(bytes)]), `phone-${i}.jpg`);
      const response = await fetch(`${stack.base}/upload`, {
        method: 'POST',
        headers: { authorization: 'Bearer scrub' },
        body: form,
      });
      assert.equal(response.status, 200);
      urls[i] = /** @type {{ url: string }} */ (await response.json()).url;
    };
    // four at a time, as a site's uploads arrive (the store is the subject here, not the order)
    for (let i = 0; i < 1000; i += 4) await Promise.all([i, i + 1, i + 2, i + 3].map(upload));
    const cached = urls[7];
    const first = Buffer.from(await (await fetch(cached)).arrayBuffer());
    assert.ok(personalTags(readMetadata(first)).length > 0, 'stored as uploaded: GPS and all');
    assert.equal((await fetch(cached)).headers.get('x-cache'), 'HIT');

    const interrupted = /** @type {any} */ (await scrubStore(300));
    assert.equal(interrupted.signal, 'SIGKILL');
    assert.ok(
      interrupted.records >= 300 && interrupted.records < 1000,
      `${interrupted.records} scrubbed before the interruption`,
    );
    const resumed = /** @type {any} */ (await scrubStore());
    assert.equal(resumed.code, 0, resumed.stderr.slice(-2000));
    assert.equal(resumed.result.total, 1000);
    assert.equal(resumed.result.already + resumed.result.scrubbed, 1000, JSON.stringify(resumed.result));
    assert.ok(resumed.result.already >= interrupted.records - 4, 'what was done before is not done again');
    assert.equal(resumed.records, 1000);
    const again = /** @type {any} */ (await scrubStore());
    assert.deepEqual([again.result.already, again.result.scrubbed], [1000, 0], 'a third run changes nothing');

    // the purge service took the old bytes out of varnish: the edge answers the scrubbed original
    await waitFor(
      async () => personalTags(readMetadata(Buffer.from(await (await fetch(cached)).arrayBuffer()))).length === 0,
      30_000,
      'the edge serving the scrubbed original',
    );
    const now = Buffer.from(await (await fetch(cached)).arrayBuffer());
    assert.equal(readMetadata(now)['IFD0:Make'], 'Apple');
    const [before, after] = await Promise.all([first, now].map((bytes) => sharp(bytes).raw().toBuffer()));
    assert.ok(after.equals(before), 'the same pixels');
  },
);
