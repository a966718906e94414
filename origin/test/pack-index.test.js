import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { GoneError } from '@stack/lib';
import { PackCache } from '../src/cache/pack-cache.js';
import { PackIndex } from '../src/cache/pack-index.js';

/** @param {string | number} name */
const keyOf = (name) => createHash('sha256').update(String(name)).digest('hex');

/** Deterministic bytes for record `i`, 1 to 6 KB. @param {number} i @param {number} [version] */
const dataOf = (i, version = 0) => Buffer.alloc(1024 + ((i * 7919) % 5120), `${i}:${version};`);

/** @param {import('node:test').TestContext} t */
function tempDir(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pack-index-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** What a cache's index says, keyed by full key: [segment, offset, size, ext]. @param {PackCache} cache @param {string[]} keys */
function snapshot(cache, keys) {
  return new Map(
    keys.map((key) => {
      const entry = cache.get(key);
      return [key, entry && [entry.segment.seq, entry.offset, entry.size, entry.ext]];
    }),
  );
}

/**
 * A cache with 3,000 records over about 20 segments, some keys written twice (the later one counts). Returns every key it was asked to hold. @param {string} dir
 */
async function fill(dir) {
  const cache = new PackCache(dir, 64 * 1024 * 1024, { segmentBytes: 512 * 1024 });
  cache.init();
  const keys = [];
  for (let i = 0; i < 3000; i += 1) {
    keys.push(keyOf(i));
    cache.put(keyOf(i), i % 3 ? 'webp' : 'avif', dataOf(i));
    if (i % 10 === 9) cache.put(keyOf(i - 5), 'jpg', dataOf(i - 5, 1));
  }
  await cache.close();
  return keys;
}

test('the compact index: newest record wins in any order, dead segments drop out at a rehash, forgotten keys shadow older records only while shadowing', () => {
  const live = new Set([1, 2, 3]);
  const index = new PackIndex((seq) => live.has(seq));
  const key = Buffer.from(keyOf('a'), 'hex');
  index.set(key, 0, 2, 100, 10, 1);
  index.set(key, 0, 1, 500, 20, 1); // older segment: ignored
  index.set(key, 0, 2, 50, 30, 1); // same segment, earlier: ignored
  assert.deepEqual(index.get(key), { seq: 2, offset: 100, size: 10, ext: 1 });
  index.set(key, 0, 2, 200, 40, 2);
  assert.deepEqual(index.get(key), { seq: 2, offset: 200, size: 40, ext: 2 });
  live.delete(2);
  assert.equal(index.get(key), null, 'an entry in a deleted segment is gone');
  index.set(key, 0, 1, 8, 8, 1); // and an older live record may take its place
  assert.deepEqual(index.get(key), { seq: 1, offset: 8, size: 8, ext: 1 });

  index.shadowing = true;
  index.set(key, 0, 3, 0, 0, 255);
  assert.equal(index.get(key), null);
  index.set(key, 0, 1, 16, 8, 1);
  assert.equal(index.get(key), null, 'a forgotten key is not brought back by an older record');
  index.set(key, 0, 3, 64, 8, 1);
  assert.deepEqual(index.get(key), { seq: 3, offset: 64, size: 8, ext: 1 }, 'a newer one does');

  live.add(2);
  for (let i = 0; i < 5000; i += 1) index.set(Buffer.from(keyOf(i), 'hex'), 0, 1 + (i % 3), i, 1, 0);
  assert.ok(index.capacity * 0.8 >= index.used, 'never more than 80 % full');
  live.delete(1);
  index.rehash(0);
  assert.equal(index.count(), 3334, 'only the entries of live segments are left (and the key above)');
  for (let i = 0; i < 5000; i += 1) assert.equal(Boolean(index.get(Buffer.from(keyOf(i), 'hex'))), i % 3 !== 0);
  assert.ok(index.bytes / index.count() <= 64, `${index.bytes} bytes for ${index.count()} entries`);
});

test('the index grows a few hundred entries at a time: every key is found while entries move, the newest record wins across both tables, and the result equals a table that never grew', () => {
  const live = new Set([1, 2, 3]);
  const growing = new PackIndex((seq) => live.has(seq));
  const reference = new PackIndex((seq) => live.has(seq), 200_000);
  const key = (/** @type {number} */ i) => Buffer.from(keyOf(i), 'hex');
  let grew = 0;
  let checkedWhileMoving = 0;
  for (let i = 0; i < 60_000; i += 1) {
    const record = /** @type {const} */ ([1 + (i % 3), i * 8, 100 + (i % 50), i % 4]);
    const before = growing.old;
    growing.set(key(i), 0, ...record);
    reference.set(key(i), 0, ...record);
    if (!before && growing.old) {
      grew += 1;
      const moving = growing.old;
      // while the entries move: an older record of a key not moved yet loses to it, a newer one wins, a
      // forgotten key stays forgotten, and every key is found in one table or the other
      const early = key(3);
      growing.set(early, 0, 1, 8, 1, 0);
      reference.set(early, 0, 1, 8, 1, 0);
      assert.deepEqual(
        growing.get(early),
        { seq: 1, offset: 24, size: 103, ext: 3 },
        'an older record does not replace a newer one',
      );
      // a few hundred entries move per call: two calls later, a table of thousands is still moving
      if (moving.capacity >= 4096) assert.ok(growing.old === moving, 'still moving');
      for (let j = 0; j <= i; j += 97) {
        assert.ok(growing.get(key(j)), `key ${j} found while the table grows`);
        checkedWhileMoving += 1;
      }
    }
  }
  assert.ok(grew >= 5, `grew ${grew} times`);
  assert.ok(checkedWhileMoving > 1000);
  for (let i = 60_000; i < 60_010; i += 1) {
    growing.set(key(i), 0, 3, 0, 1, 0);
    reference.set(key(i), 0, 3, 0, 1, 0);
  }
  growing.set(key(5), 0, 3, 999, 7, 1);
  reference.set(key(5), 0, 3, 999, 7, 1);
  growing.set(key(6), 0, 3, 1000, 0, 255);
  reference.set(key(6), 0, 3, 1000, 0, 255);
  assert.equal(growing.get(key(6)), null);
  assert.deepEqual(growing.entries(), reference.entries(), 'the same entries as a table that never grew');
  assert.equal(growing.old, null);
  assert.ok(growing.capacity * 0.8 >= growing.used, 'never more than 80 % full');
});

test('the result cache serves while its index is rebuilt in the background, and the index built so equals one built before any use', async (t) => {
  const variants = path.join(tempDir(t), 'variants');
  const keys = await fill(variants);
  for (const name of fs.readdirSync(variants).filter((n) => n.endsWith('.idx'))) fs.rmSync(path.join(variants, name));

  // the reference: segments read one by one (no index files), nothing else going on
  const reference = new PackCache(variants, 64 * 1024 * 1024, { segmentBytes: 512 * 1024 });
  reference.init();
  await reference.built;
  const expected = snapshot(reference, keys);
  const indexFiles = fs.readdirSync(variants).filter((n) => n.endsWith('.idx')).length;
  await reference.close();
  assert.ok(indexFiles >= 18, `${indexFiles} index files written for the segments it read`);
  for (let i = 0; i < 3000; i += 1) {
    const entry = expected.get(keyOf(i));
    assert.equal(entry?.[3], i % 10 === 4 && i < 2995 ? 'jpg' : i % 3 ? 'webp' : 'avif', `key ${i}: its newest record`);
  }

  // the same directory opened again (index files now) and used at once: puts, reads and a takedown
  const cache = new PackCache(variants, 64 * 1024 * 1024, { segmentBytes: 512 * 1024 });
  cache.init();
  assert.ok(cache.building, 'init returns before the index is built');
  const fresh = keyOf('fresh');
  cache.put(fresh, 'webp', Buffer.from('made while building'));
  const freshEntry = cache.get(fresh);
  assert.ok(freshEntry);
  assert.equal((await cache.read(freshEntry)).toString(), 'made while building');
  const takenDown = keyOf(1);
  cache.forget(takenDown);
  let turns = 0;
  while (cache.building) {
    await new Promise((resolve) => setImmediate(resolve));
    turns += 1;
  }
  await cache.built;
  assert.ok(turns > 1, `the build let the event loop run (${turns} turns)`);
  const rebuilt = snapshot(cache, keys);
  for (const key of keys) {
    if (key === takenDown) assert.equal(rebuilt.get(key), null, 'a key forgotten during the build stays forgotten');
    else assert.deepEqual(rebuilt.get(key), expected.get(key), `key ${key}`);
  }
  assert.ok(cache.get(fresh));
  const some = /** @type {import('../src/cache/pack-cache.js').PackEntry} */ (cache.get(keyOf(2)));
  assert.ok((await cache.read(some)).equals(dataOf(2)));
  await cache.close();
});

test('a record whose full key is not the one asked for is not served (the index keeps only half of each key)', async (t) => {
  const dir = tempDir(t);
  const cache = new PackCache(dir, 1024 * 1024);
  cache.init();
  const key = keyOf('x');
  cache.put(key, 'jpg', Buffer.from('the real one'));
  const entry = /** @type {import('../src/cache/pack-cache.js').PackEntry} */ (cache.get(key));
  const twin = `${key.slice(0, 32)}${'0'.repeat(32)}`; // same first half
  await assert.rejects(cache.read({ ...entry, key: twin }), GoneError);
  assert.equal((await cache.read(entry)).toString(), 'the real one');
  await cache.close();
});
