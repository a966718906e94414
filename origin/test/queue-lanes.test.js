// The transform queue's later lane (#41): a warmer's transform starts only while no reader's waits and
// keepFree slots are free, runs beside the readers' slots, one at a time; readers go first; the lane is bounded.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TransformQueue } from '../src/queue.js';

/** A task that ends when its release is called, recording when it started. @param {string[]} log @param {string} name */
function held(log, name) {
  /** @type {() => void} */
  let end = () => {};
  const done = new Promise((resolve) => {
    end = () => resolve(name);
  });
  return {
    task: async () => {
      log.push(name);
      return done;
    },
    end,
  };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

test("later tasks run beside the readers' slots: readers find every slot, and a later task starts only while none waits", async () => {
  const queue = new TransformQueue({ concurrency: 2, maxQueued: 10, keepFree: 1, laterMax: 2 });
  const log = [];
  const warmA = held(log, 'warm-a');
  const warmB = held(log, 'warm-b');
  const readers = [held(log, 'reader-1'), held(log, 'reader-2'), held(log, 'reader-3')];
  const runs = [queue.run(warmA.task, { later: true })];
  await tick();
  assert.deepEqual(log, ['warm-a'], 'an idle queue starts a later task at once');
  runs.push(queue.run(warmB.task, { later: true }));
  await tick();
  assert.deepEqual(log, ['warm-a'], 'one later task at a time: the second waits');
  assert.ok(queue.laterHasRoom && queue.later.length === 1);
  runs.push(...readers.map((reader) => queue.run(reader.task, { small: true })));
  await tick();
  assert.deepEqual(
    log,
    ['warm-a', 'reader-1', 'reader-2'],
    'readers take both slots, the later task running beside them',
  );
  assert.equal(queue.running, 2);
  warmA.end();
  await tick();
  await tick();
  assert.deepEqual(
    log,
    ['warm-a', 'reader-1', 'reader-2'],
    "a later task's end frees no reader's slot, and a reader waits: nothing starts",
  );
  readers[0].end();
  await tick();
  await tick();
  assert.deepEqual(
    log,
    ['warm-a', 'reader-1', 'reader-2', 'reader-3'],
    'the waiting reader goes before the waiting later task',
  );
  readers[1].end();
  await tick();
  await tick();
  assert.deepEqual(
    log,
    ['warm-a', 'reader-1', 'reader-2', 'reader-3'],
    'one slot busy and one to keep free: the later task still waits',
  );
  readers[2].end();
  await tick();
  await tick();
  assert.deepEqual(log, ['warm-a', 'reader-1', 'reader-2', 'reader-3', 'warm-b'], 'idle again: the later task starts');
  warmB.end();
  await Promise.all(runs);
  assert.deepEqual([queue.running, queue.laterRunning], [0, 0]);
});

test('the later lane is bounded; a one-slot machine still warms when idle', async () => {
  const queue = new TransformQueue({ concurrency: 1, maxQueued: 10, keepFree: 1, laterMax: 1 });
  const log = [];
  const first = held(log, 'warm-1');
  const running = queue.run(first.task, { later: true });
  await tick();
  assert.deepEqual(log, ['warm-1'], 'its one slot, when nothing else waits');
  const second = held(log, 'warm-2');
  const waiting = queue.run(second.task, { later: true });
  await tick();
  assert.equal(queue.laterHasRoom, false);
  first.end();
  second.end();
  await Promise.all([running, waiting]);
  assert.deepEqual(log, ['warm-1', 'warm-2']);
});

test('at most laterConcurrency later tasks run at once, however many slots are free', async () => {
  const queue = new TransformQueue({ concurrency: 4, maxQueued: 10, keepFree: 1, laterMax: 4, laterConcurrency: 1 });
  const log = [];
  const warm = [held(log, 'warm-1'), held(log, 'warm-2')];
  const runs = warm.map((one) => queue.run(one.task, { later: true }));
  await tick();
  assert.deepEqual(log, ['warm-1'], 'three slots free, one later task');
  const reader = held(log, 'reader');
  runs.push(queue.run(reader.task, { small: true }));
  await tick();
  assert.deepEqual(log, ['warm-1', 'reader'], 'readers take the free slots as ever');
  warm[0].end();
  await tick();
  await tick();
  assert.deepEqual(log, ['warm-1', 'reader', 'warm-2'], 'the next later task once the first ends');
  warm[1].end();
  reader.end();
  await Promise.all(runs);
  assert.equal(queue.laterRunning, 0);
});
