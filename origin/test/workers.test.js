// Transform worker processes (AVIFs, HEIC sources, large variants) are kept for the next job, one a core at
// most, but one idle past TRANSFORM_WORKER_IDLE_S ends unless it is the last one alive: after a burst each
// holds the memory of its largest encode, one a core, for good (~170 MB each after 2000-px AVIFs).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import { after, before, test } from 'node:test';
import { decode, photo } from '../../test/support/images.js';
import { metricValue } from '../../test/support/metrics.js';
import { waitFor } from '../../test/support/ports.js';
import { startOrigin } from './harness.js';

/** @type {Awaited<ReturnType<typeof startOrigin>>} */
let origin;

before(async () => {
  origin = await startOrigin({ TRANSFORM_WORKER_IDLE_S: '1', TRANSFORM_CONCURRENCY: '3' });
});
after(() => origin?.stop());

/** The origin's transform worker processes, as the kernel lists them. @returns {number[]} */
function workerPids() {
  const pid = origin.pid();
  return fs
    .readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
    .trim()
    .split(/\s+/)
    .filter(Boolean)
    .map(Number)
    .filter((child) => {
      try {
        return fs.readFileSync(`/proc/${child}/cmdline`, 'utf8').includes('transform-worker');
      } catch {
        return false;
      }
    });
}

const readers = { pool: 'readers' };
const MEMORY = 'origin_transform_workers_resident_memory_bytes';
const alive = () => metricValue(origin.metricsUrl, 'origin_transform_workers', readers);

test(
  'idle transform workers end after TRANSFORM_WORKER_IDLE_S but the last one, which the next AVIF reuses',
  { skip: process.platform !== 'linux' || os.availableParallelism() < 2 ? 'needs Linux and 2 cores' : false },
  async () => {
    const source = origin.site.add('path.jpg', fs.readFileSync(photo('Path', '1280x800')));
    // three AVIFs at once: a worker each; watched as they run (on a busy machine the first may have idled out
    // before the last answers)
    let most = 0;
    let memory = 0;
    let watching = true;
    const watch = (async () => {
      while (watching) {
        most = Math.max(most, workerPids().length, await alive());
        memory = Math.max(memory, await metricValue(origin.metricsUrl, MEMORY, readers));
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();
    const answers = await Promise.all(
      [640, 800, 960].map((width) => fetch(origin.proxied(source, { width, format: 'avif' }))),
    );
    for (const [i, response] of answers.entries()) {
      assert.equal(response.status, 200);
      const image = await decode(Buffer.from(await response.arrayBuffer()));
      assert.equal(image.format, 'heif');
      assert.equal(image.width, [640, 800, 960][i]);
    }
    watching = false;
    await watch;
    assert.ok(most >= 2, `workers at once: ${most}`);
    assert.ok(memory > 2 * 30 * 2 ** 20, `their resident memory: ${memory} bytes`);

    // idle past 1 s: all but one end, and their memory with them
    await waitFor(async () => workerPids().length === 1 && (await alive()) === 1, 15_000, 'one worker left');
    const [last] = workerPids();
    await new Promise((resolve) => setTimeout(resolve, 2500));
    assert.deepEqual(workerPids(), [last], 'the last one alive stays');
    const left = await metricValue(origin.metricsUrl, MEMORY, readers);
    assert.ok(left < memory, `memory after: ${left} of ${memory} bytes`);

    // the next AVIF is made in it: no new process
    const next = await fetch(origin.proxied(source, { width: 320, format: 'avif' }));
    assert.equal(next.status, 200);
    assert.equal((await decode(Buffer.from(await next.arrayBuffer()))).width, 320);
    assert.deepEqual(workerPids(), [last]);
  },
);
