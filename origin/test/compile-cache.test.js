// bin/origin keeps Node's compile cache in DATA_DIR: a killed origin has written it (it never exits to write
// it then), the next start takes every entry of it, and it is the origin's own (no one else may write code it runs).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { closeParts, originParts } from './harness.js';
import { startService } from '../../test/support/processes.js';

test("a killed origin's compile cache is in DATA_DIR, its own, and read by the next start", async () => {
  const parts = await originParts({}, os.tmpdir());
  const { settings, dataDir, port } = parts;
  delete settings.NODE_COMPILE_CACHE; // bin/origin's default, not the tests' shared one
  try {
    const first = await startService('origin/bin/origin', settings, port);
    await first.kill();
    const cache = path.join(dataDir, 'compile-cache');
    const before = cached(cache);
    assert.ok(before.size > 100, `${before.size} files in ${cache}`);
    for (const dir of [dataDir, cache]) assert.equal(fs.statSync(dir).mode & 0o002, 0, `${dir} writable by others`);
    const again = await startService('origin/bin/origin', settings, port);
    await again.stop();
    // Node writes an entry again only where it was missing or refused: each one read and taken stays as it was
    const rewritten = [...cached(cache)].filter(([file, stamp]) => before.get(file) !== stamp);
    assert.deepEqual(rewritten, []);
  } finally {
    await closeParts(parts);
  }
});

/** Each file of the cache, its size and time of change. @param {string} dir */
function cached(dir) {
  const files = fs.readdirSync(dir, { recursive: true, withFileTypes: true }).filter((entry) => entry.isFile());
  return new Map(
    files.map((entry) => {
      const file = path.join(entry.parentPath, entry.name);
      const { size, mtimeMs } = fs.statSync(file);
      return [file, `${size}@${mtimeMs}`];
    }),
  );
}
