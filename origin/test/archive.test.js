// The warm archive (#51): each content kept once however many URLs name it, within WARM_ARCHIVE_BYTES with
// the oldest kept going first, a takedown's copy gone, and what was kept found again after a restart.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { createArchive } from '../src/originals/archive.js';

/** A data directory and a file of `size` bytes of `fill` in it. */
function fixture() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'archive-'));
  const file = (/** @type {string} */ name, /** @type {number} */ size, /** @type {number} */ fill) => {
    const at = path.join(dir, name);
    fs.writeFileSync(at, Buffer.alloc(size, fill));
    return at;
  };
  /** bytes of regular files under the archive, each inode once (what the disk holds) */
  const diskBytes = () => {
    const inodes = new Map();
    const walk = (/** @type {string} */ at) => {
      for (const entry of fs.readdirSync(at, { withFileTypes: true })) {
        const full = path.join(at, entry.name);
        if (entry.isDirectory()) walk(full);
        else inodes.set(fs.statSync(full).ino, fs.statSync(full).size);
      }
    };
    walk(path.join(dir, 'archive'));
    return [...inodes.values()].reduce((a, b) => a + b, 0);
  };
  return { dir, file, diskBytes, remove: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

const id = (/** @type {number} */ n) => n.toString(16).padStart(64, '0');

test('one image under 64 URLs is kept once; every URL finds it; what the warmer fetched is counted per URL', async () => {
  const { dir, file, diskBytes, remove } = fixture();
  try {
    const kept = [];
    const archive = createArchive(dir, { maxBytes: 10_000_000, onKept: (bytes) => kept.push(bytes) });
    const original = file('fetched', 100_000, 7);
    for (let n = 0; n < 64; n += 1) await archive.keep(id(n), original);
    await archive.keep(id(0), original); // asked again by another size: nothing new
    assert.deepEqual(await archive.size(), { contents: 1, bytes: 100_000, ids: 64 });
    assert.equal(diskBytes(), 100_000, 'the disk holds the content once');
    assert.equal(kept.length, 64);
    for (const n of [0, 31, 63])
      assert.equal(fs.readFileSync(/** @type {string} */ (await archive.get(id(n)))).length, 100_000);
  } finally {
    remove();
  }
});

test('past WARM_ARCHIVE_BYTES the oldest kept go first; a restart finds what is kept, in the same order', async () => {
  const { dir, file, diskBytes, remove } = fixture();
  try {
    let evicted = 0;
    const archive = createArchive(dir, { maxBytes: 250_000, onEvict: () => (evicted += 1) });
    for (let n = 0; n < 5; n += 1) await archive.keep(id(n), file(`f${n}`, 100_000, n));
    assert.equal(evicted, 3);
    assert.equal(await archive.get(id(0)), null, 'the oldest went');
    assert.equal(await archive.get(id(2)), null);
    assert.ok(await archive.get(id(3)));
    assert.ok(await archive.get(id(4)));
    assert.ok(diskBytes() <= 250_000, `${diskBytes()} bytes on disk`);
    // too large for the archive at all: not kept, nothing evicted for it
    await archive.keep(id(9), file('huge', 300_000, 9));
    assert.equal(await archive.get(id(9)), null);
    assert.ok(await archive.get(id(4)));

    const again = createArchive(dir, { maxBytes: 150_000 });
    assert.deepEqual(
      await again.size(),
      { contents: 1, bytes: 100_000, ids: 1 },
      'a smaller budget at start evicts the oldest',
    );
    assert.ok(await again.get(id(4)));
  } finally {
    remove();
  }
});

test("a takedown removes its URL's copy, and the content once no other URL holds it", async () => {
  const { dir, file, diskBytes, remove } = fixture();
  try {
    const archive = createArchive(dir, { maxBytes: 1_000_000 });
    const original = file('fetched', 50_000, 1);
    await archive.keep(id(1), original);
    await archive.keep(id(2), original);
    await archive.remove(id(1));
    assert.equal(await archive.get(id(1)), null);
    assert.ok(await archive.get(id(2)), 'the same picture under another URL stays');
    await archive.remove(id(2));
    assert.deepEqual(await archive.size(), { contents: 0, bytes: 0, ids: 0 });
    assert.equal(diskBytes(), 0);
  } finally {
    remove();
  }
});

test('originals kept before contents were deduplicated are taken into the new layout at start', async () => {
  const { dir, remove, diskBytes } = fixture();
  try {
    for (const n of [1, 2]) {
      const at = path.join(dir, 'archive', id(n).slice(0, 2), id(n));
      fs.mkdirSync(path.dirname(at), { recursive: true });
      fs.writeFileSync(at, Buffer.alloc(30_000, 5));
    }
    const archive = createArchive(dir, { maxBytes: 1_000_000 });
    assert.deepEqual(await archive.size(), { contents: 1, bytes: 30_000, ids: 2 });
    assert.equal(diskBytes(), 30_000);
    assert.equal(fs.readFileSync(/** @type {string} */ (await archive.get(id(2)))).length, 30_000);
  } finally {
    remove();
  }
});
