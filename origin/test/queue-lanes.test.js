// The transform queue's later lane (#41): a warmer's transform starts only while no reader's waits and
// keepFree slots stay free after it; readers queued behind it go first; the lane is bounded.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TransformQueue } from '../src/queue.js';

/** A task that ends when its release is called, recording when it started. @param {string[]} log @param {string} name */
function held(log, name) {
  /** @type {() => void} */
  let end = () => {};
  const done = new Promise((resolve) => { end = () => resolve(name); });
  return { task: async () => { log.push(name); return done; }, end };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

test('later tasks keep a slot free for readers and yield to every waiting reader', async () => {
  const queue = new TransformQueue({ concurrency: 2, maxQueued: 10, keepFree: 1, laterMax: 2 });
  const log = [];
  const warmA = held(log, 'warm-a');
  const warmB = held(log, 'warm-b');
  const readers = [held(log, 'reader-1'), held(log, 'reader-2')];
  const runs = [queue.run(warmA.task, false, undefined, true)];
  await tick();
  assert.deepEqual(log, ['warm-a'], 'an idle queue starts a later task at once');
  runs.push(queue.run(warmB.task, false, undefined, true));
  await tick();
  assert.deepEqual(log, ['warm-a'], 'a second would take the last free slot: it waits');
  assert.ok(queue.laterHasRoom && queue.later.length === 1);
  runs.push(queue.run(readers[0].task, true));
  runs.push(queue.run(readers[1].task, true));
  await tick();
  assert.deepEqual(log, ['warm-a', 'reader-1'], 'a reader takes the free slot');
  warmA.end();
  await tick();
  await tick();
  assert.deepEqual(log, ['warm-a', 'reader-1', 'reader-2'], 'the waiting reader goes before the waiting warm task');
  readers[0].end();
  await tick();
  await tick();
  assert.deepEqual(log, ['warm-a', 'reader-1', 'reader-2'], 'one slot busy and one to keep free: the warm task still waits');
  readers[1].end();
  await tick();
  await tick();
  assert.deepEqual(log, ['warm-a', 'reader-1', 'reader-2', 'warm-b'], 'idle again: the warm task starts');
  warmB.end();
  await Promise.all(runs);
  assert.equal(queue.running, 0);
});

test('the later lane is bounded; a one-slot machine still warms when idle', async () => {
  const queue = new TransformQueue({ concurrency: 1, maxQueued: 10, keepFree: 1, laterMax: 1 });
  const log = [];
  const first = held(log, 'warm-1');
  const running = queue.run(first.task, false, undefined, true);
  await tick();
  assert.deepEqual(log, ['warm-1'], 'its one slot, when nothing else waits');
  const second = held(log, 'warm-2');
  const waiting = queue.run(second.task, false, undefined, true);
  await tick();
  assert.equal(queue.laterHasRoom, false);
  first.end();
  second.end();
  await Promise.all([running, waiting]);
  assert.deepEqual(log, ['warm-1', 'warm-2']);
});
