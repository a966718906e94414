// The origin's disk full (its data directory on a 24 MB tmpfs, filled): what it has cached it still serves, a
// new original or upload is a 507 insufficient_storage at once (not a 502 blamed on the image host and
// remembered as the source's failure, not an upload that waits for nothing), and once there is room again
// everything works at once. Mounting a tmpfs needs root: skipped elsewhere.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { startOrigin } from '../origin/test/harness.js';
import { decode, photo } from './support/images.js';
import { tokenUpload } from './support/upload.js';

/** A 24 MB tmpfs of its own, or null where this process may not mount one. */
function smallDisk() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'disk-full-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=24m,mode=0755', 'tmpfs', dir], { stdio: 'ignore' });
    return dir;
  } catch {
    fs.rmSync(dir, { recursive: true, force: true });
    return null;
  }
}

const disk = process.getuid?.() === 0 ? smallDisk() : null;

test(
  'disk full: cached variants still served; a new original or upload a 507 at once, nothing remembered once there is room',
  { skip: disk ? false : 'needs root to mount a tmpfs' },
  async () => {
    const dir = /** @type {string} */ (disk);
    const origin = await startOrigin({}, { dataParent: dir });
    const filler = path.join(dir, 'filler');
    try {
      const bytes = fs.readFileSync(photo('Path', '1280x800'));
      const seen = origin.site.add('seen.jpg', bytes);
      const first = await fetch(origin.proxied(seen, { width: 300 }));
      assert.equal(first.status, 200);
      await first.arrayBuffer();

      // the disk filled to its last byte
      assert.throws(() => fs.writeFileSync(filler, Buffer.alloc(64 * 2 ** 20)), /ENOSPC/);

      const cached = await fetch(origin.proxied(seen, { width: 300 }));
      assert.equal(cached.status, 200);
      assert.equal((await decode(Buffer.from(await cached.arrayBuffer()))).width, 300);

      const unseen = origin.site.add('unseen.jpg', bytes);
      const refused = await fetch(origin.proxied(unseen, { width: 300 }));
      assert.equal(refused.status, 507);
      assert.equal(refused.headers.get('retry-after'), '60');
      assert.equal(/** @type {any} */ (await refused.json()).error.name, 'insufficient_storage');

      const started = performance.now();
      const upload = await tokenUpload(origin.base, bytes, 'full.jpg');
      assert.equal(upload.status, 507);
      assert.ok(performance.now() - started < 10_000, 'answered, not left waiting');
      assert.equal((await fetch(`${origin.base}/healthz`)).status, 200);

      // room again: the source was not remembered as failed, and uploads are taken
      fs.rmSync(filler);
      const made = await fetch(origin.proxied(unseen, { width: 300 }));
      assert.equal(made.status, 200);
      assert.equal((await decode(Buffer.from(await made.arrayBuffer()))).width, 300);
      assert.equal((await tokenUpload(origin.base, bytes, 'room.jpg')).status, 200);
    } finally {
      await origin.stop();
      execFileSync('umount', [dir]);
      fs.rmSync(dir, { recursive: true, force: true });
    }
  },
);
