import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import os from 'node:os';
import { test } from 'node:test';
import sharp from 'sharp';
import { lowerWorkerPriority } from '../src/nice.js';

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
