import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { loadSystemCodecs } from '../src/codecs.js';
import { plan, probe, transform } from '../src/pipeline/index.js';
import { createTransformThreads, transformLoops } from '../src/workers/threads.js';
import { photo } from '../../test/support/images.js';
import { TRANSFORM_OPTIONS } from './harness.js';

const OPTIONS = { ...TRANSFORM_OPTIONS, timeoutS: 30 };
const threads = createTransformThreads({ count: 2, systemCodecs: 'on' });
/** @type {string} */
let dir;

before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'threads-'));
});
after(async () => {
  fs.rmSync(dir, { recursive: true, force: true });
  await threads.close();
});

/** @param {string} file @param {{ width: number | null, height: number | null, mode: 'fit' | 'cover', format: string }} want */
async function planOf(file, want) {
  return plan(await probe(file, { maxPixels: OPTIONS.maxPixels, maxFrames: 1 }), { ...want, accept: '' }, false);
}

test('a transform thread makes the very bytes this thread makes, with the system codecs it loaded itself', async () => {
  const codecs = loadSystemCodecs('on');
  const file = photo('Path', '1920x1080');
  const wants = /** @type {const} */ ([
    { width: 512, height: 512, mode: 'fit', format: 'webp' },
    { width: 300, height: 300, mode: 'cover', format: 'jpeg' },
    { width: 64, height: null, mode: 'fit', format: 'png' },
  ]);
  // several at once, spread over both threads
  const made = await Promise.all(wants.map(async (want) => threads.run(file, await planOf(file, want), OPTIONS)));
  for (const [i, want] of wants.entries()) {
    const here = await transform(file, await planOf(file, want), { ...OPTIONS, codecs });
    assert.deepEqual(made[i].codecs, here.codecs, want.format);
    assert.ok(Buffer.isBuffer(made[i].data));
    assert.ok(made[i].data.equals(here.data), `${want.format}: the same bytes`);
  }
  assert.equal(threads.running, 0);
});

test("a transform's failure crosses as the same JSON error: a cut file, a file gone", async () => {
  const whole = fs.readFileSync(photo('Kite', '1920x1080'));
  const cut = path.join(dir, 'cut.jpg');
  fs.writeFileSync(cut, whole);
  const p = await planOf(cut, { width: 400, height: null, mode: 'fit', format: 'jpeg' });
  fs.writeFileSync(cut, whole.subarray(0, 4000));
  const here = await transform(cut, p, OPTIONS).catch((err) => err);
  const there = await threads.run(cut, p, OPTIONS).catch((err) => err);
  assert.ok(here.status >= 400, `in this thread: ${here.status}`);
  assert.deepEqual([there.status, there.name], [here.status, here.name]);

  fs.rmSync(cut);
  const gone = await threads.run(cut, p, OPTIONS).catch((err) => err);
  const goneHere = await transform(cut, p, OPTIONS).catch((err) => err);
  assert.deepEqual([gone.status, gone.name], [goneHere.status, goneHere.name]);
  // and the threads go on
  const file = photo('Path', '1920x1080');
  const after = await threads.run(
    file,
    await planOf(file, { width: 100, height: null, mode: 'fit', format: 'jpeg' }),
    OPTIONS,
  );
  assert.ok(after.data.length > 0);
});

test('transform loops by default: none up to 16 cores, one for each 16 past them; a setting wins, -1 is none', () => {
  assert.deepEqual(
    [1, 2, 8, 16, 17, 32, 33, 64].map((cores) => transformLoops(0, cores)),
    [0, 0, 0, 0, 1, 1, 2, 3],
  );
  assert.equal(transformLoops(2, 4), 2);
  assert.equal(transformLoops(-1, 64), 0);
});
