// The AVIFs behind first answers (background.js): made on the slots readers leave, several at once on a
// bigger machine (BACKGROUND_ENCODES: half the cores by default), never ahead of a reader who waits.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createBackground } from '../src/background.js';
import { TransformQueue } from '../src/queue.js';

const tick = () => new Promise((resolve) => setImmediate(resolve));

/**
 * A background of its own on `queue`, whose jobs each take a slot (after a turn of the event loop, as a real
 * one fetches its original first) and hold it until ended. @param {TransformQueue} queue @param {number} concurrency
 */
function backgroundOn(queue, concurrency) {
  /** @type {string[]} */
  const started = [];
  /** @type {Map<string, () => void>} */
  const ends = new Map();
  /** @type {string[]} */
  const results = [];
  const background = createBackground({
    queue,
    concurrency,
    maxPending: 16,
    pollMs: 5,
    onResult: (result) => results.push(result),
  });
  /** @param {string} key */
  const add = (key) =>
    background.add(key, async () => {
      started.push(key);
      await tick();
      await queue.run(() => new Promise((resolve) => ends.set(key, () => resolve(null))));
    });
  /** @param {string} key */
  const end = (key) => /** @type {() => void} */ (ends.get(key))();
  return { add, end, started, results };
}

test('several at once, up to their bound, on free slots; the next starts as one ends', async () => {
  const queue = new TransformQueue({ concurrency: 8, maxQueued: 8 });
  const later = backgroundOn(queue, 3);
  for (const key of ['a', 'b', 'c', 'd', 'e']) later.add(key);
  await tick();
  await tick();
  assert.deepEqual(later.started, ['a', 'b', 'c'], 'three at once');
  assert.equal(queue.running, 3);
  later.end('b');
  await new Promise((resolve) => setTimeout(resolve, 30));
  assert.deepEqual(later.started, ['a', 'b', 'c', 'd']);
  for (const key of ['a', 'c', 'd']) later.end(key);
  await new Promise((resolve) => setTimeout(resolve, 30));
  later.end('e');
  await new Promise((resolve) => setTimeout(resolve, 30));
  assert.deepEqual(later.results, ['done', 'done', 'done', 'done', 'done']);
  assert.equal(queue.running, 0);
});

test("never more than the free slots, and none while a reader waits: the readers' slots come first", async () => {
  const queue = new TransformQueue({ concurrency: 4, maxQueued: 8 });
  /** @type {Array<() => void>} */
  const readersEnd = [];
  const reader = () => queue.run(() => new Promise((resolve) => readersEnd.push(() => resolve(null))));
  const readers = [reader(), reader()];
  await tick();
  const later = backgroundOn(queue, 4);
  for (const key of ['a', 'b', 'c', 'd']) later.add(key);
  await tick();
  await tick();
  assert.deepEqual(later.started, ['a', 'b'], 'two slots were free');
  assert.equal(queue.running, 4);

  // every slot busy and a reader waiting: the background starts nothing, even as one of its own ends
  const waiting = reader();
  await tick();
  assert.equal(queue.depth, 1);
  later.end('a');
  await new Promise((resolve) => setTimeout(resolve, 30));
  assert.equal(queue.depth, 0, 'the waiting reader took the slot');
  assert.deepEqual(later.started, ['a', 'b'], 'nothing started ahead of it');

  // the readers end: the rest start
  for (const end of readersEnd.splice(0)) end();
  await Promise.all([...readers, waiting]);
  await new Promise((resolve) => setTimeout(resolve, 30));
  assert.deepEqual(later.started, ['a', 'b', 'c', 'd']);
});
