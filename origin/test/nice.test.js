import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import os from 'node:os';
import { test } from 'node:test';
import sharp from 'sharp';
import { lowerWorkerPriority } from '../src/workers/nice.js';

const threads = () =>
  readdirSync('/proc/self/task').map((tid) => ({
    tid: Number(tid),
    name: readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim(),
    nice: os.getPriority(Number(tid)),
  }));

test('every thread but the event loop runs at the lower priority', { skip: process.platform !== 'linux' }, async () => {
  await sharp({ create: { width: 2000, height: 2000, channels: 3, background: '#336699' } })
    .resize(100)
    .jpeg()
    .toBuffer();
  const priority = lowerWorkerPriority({ nice: 7, intervalMs: 60_000 });
  try {
    assert.ok(priority.scan() > 0, 'some threads were lowered');
    const all = threads();
    const others = all.filter((thread) => thread.tid !== process.pid);
    assert.ok(
      others.some((thread) => thread.name === 'libvips worker'),
      'libvips workers are among them',
    );
    assert.ok(
      others.every((thread) => thread.nice === 7),
      JSON.stringify(others),
    );
    assert.equal(all.find((thread) => thread.tid === process.pid)?.nice, 0, 'the main thread is untouched');
    assert.equal(priority.scan(), 0, 'a second scan has nothing left to lower');
  } finally {
    priority.stop();
  }
});

test(
  "a transform worker's threads all run at its priority while it encodes, not only its main thread",
  { skip: process.platform !== 'linux' },
  async () => {
    const { createWorkerPool } = await import('../src/workers/pool.js');
    const { plan, probe } = await import('../src/pipeline/index.js');
    const { photo } = await import('../../test/support/images.js');
    const pool = createWorkerPool({ size: 1, nice: 19 });
    const file = photo('Path', '1280x800');
    const source = await probe(file, { maxPixels: 50e6, maxFrames: 1 });
    const p = plan(source, { width: 1280, height: null, mode: 'fit', format: 'avif', accept: '' }, false);
    const { TRANSFORM_OPTIONS } = await import('./harness.js');
    // a short AVIF encode: long enough to see libvips' threads at work
    /** the worker's threads as the encode runs: name and niceness (field 19 of each thread's stat) */
    const sample = () =>
      readdirSync('/proc')
        .filter((pid) => /^\d+$/.test(pid))
        .filter((pid) => {
          try {
            // this test's own workers only (a running stack's origin has workers of its own, at another priority)
            const parent = Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')[1]);
            return parent === process.pid && readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('transform-worker');
          } catch {
            return false;
          }
        })
        .flatMap((pid) =>
          readdirSync(`/proc/${pid}/task`).map((tid) => ({
            name: readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim(),
            nice: Number(readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8').split(') ')[1].split(' ')[16]),
          })),
        );
    try {
      // the property is the threads' priority, not the encode's end: at nice 19 beside busy cores the encode
      // may take minutes (a CI run beside two `yes` timed it out), so it is not waited for
      const job = pool.run(file, p, { ...TRANSFORM_OPTIONS, avifQuality: 68, avifEffort: 2 }, 600_000);
      job.catch(() => {});
      /** @type {Array<{ name: string, nice: number }>} */
      let seen = [];
      const deadline = Date.now() + 300_000;
      while (Date.now() < deadline && !seen.some((thread) => thread.name === 'libvips worker')) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        seen = sample();
      }
      assert.ok(
        seen.some((thread) => thread.name === 'libvips worker'),
        'the encode started its libvips workers',
      );
      assert.deepEqual(
        seen.filter((thread) => thread.nice !== 19),
        [],
        'every thread of the worker at nice 19',
      );
    } finally {
      pool.close();
    }
  },
);
