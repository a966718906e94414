// The transform worker pool's pause (the warmer's pool yields to readers' transforms, #41): a paused job's
// process is stopped, its deadline stands still, and it finishes once resumed.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import sharp from 'sharp';
import { plan, probe } from '../src/pipeline/index.js';
import { createWorkerPool } from '../src/workers.js';

const OPTIONS = {
  maxPixels: 50_000_000,
  timeoutS: 60,
  jpegQuality: 80,
  jpegProgressive: false,
  jpegTrellis: false,
  webpQuality: 80,
  webpEffort: 4,
  avifQuality: 68,
  avifEffort: 4,
  threads: 1,
};
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'workers-'));
const pool = createWorkerPool({ keep: 1, nice: 0 });
after(() => {
  pool.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** The state letter of a process (R running, S sleeping, T stopped). @param {number} pid */
const stateOf = (pid) => fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1][0];

/** The worker processes of this process (the pool's children). */
function children() {
  return fs
    .readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .filter((pid) => {
      try {
        return fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')[1] === String(process.pid);
      } catch {
        return false;
      }
    })
    .map(Number);
}

test('a paused job is stopped with its deadline held, and finishes once resumed', async () => {
  // noise, so the AVIF encode takes its time (seconds on one thread here, well within its 10 s)
  const file = path.join(dir, 'noise.png');
  const noise = Buffer.alloc(1200 * 1200 * 3);
  for (let i = 0; i < noise.length; i += 1) noise[i] = (i * 2654435761) >>> 24;
  await sharp(noise, { raw: { width: 1200, height: 1200, channels: 3 } })
    .png({ compressionLevel: 1 })
    .toFile(file);
  const p = plan(
    await probe(file, { maxPixels: OPTIONS.maxPixels, maxFrames: 1 }),
    {
      width: 1200,
      height: null,
      mode: 'fit',
      format: 'avif',
      accept: '',
    },
    false,
  );
  const started = performance.now();
  const job = pool.run(file, p, OPTIONS, 10_000);
  await new Promise((resolve) => setTimeout(resolve, 200));
  pool.pause();
  const [worker] = children();
  assert.ok(worker, 'a worker process');
  await new Promise((resolve) => setTimeout(resolve, 100));
  assert.equal(stateOf(worker), 'T', 'stopped while paused');
  // paused past the job's whole deadline: a held deadline does not expire meanwhile
  await new Promise((resolve) => setTimeout(resolve, 10_500));
  assert.equal(stateOf(worker), 'T');
  pool.resume();
  const output = await job;
  const info = await sharp(output.data).metadata();
  assert.deepEqual([info.format, info.width], ['heif', 1200]);
  assert.ok(performance.now() - started > 10_500, 'it waited out the pause');
});
