// Transform worker processes (AVIFs, HEIC sources, large variants): TRANSFORM_WORKERS at most (one a core by
// default: an AVIF keeps its core busy, and each worker holds the memory of its largest encode, ~170 MB after
// 2000-px AVIFs), a transform past them waiting for one within its time; kept for the next job, but one idle
// past TRANSFORM_WORKER_IDLE_S ends unless it is the last one alive.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { decode, photo } from '../../test/support/images.js';
import { metricValue } from '../../test/support/metrics.js';
import { waitFor } from '../../test/support/ports.js';
import { startOrigin } from './harness.js';

/** @type {Awaited<ReturnType<typeof startOrigin>>} */
let origin;

before(async () => {
  origin = await startOrigin({
    TRANSFORM_WORKER_IDLE_S: '1',
    TRANSFORM_WORKERS: '2',
    TRANSFORM_CONCURRENCY: '3',
    // an operator's, for the origin's own threads (origin/bin/origin: one a core by default)
    MALLOC_ARENA_MAX: '8',
  });
});
after(() => origin?.stop());

/**
 * The transform worker processes `pid` started (its own children, not theirs: this test process's pool beside
 * the shared origin's), as the kernel lists them. @param {number} [pid] the origin's by default @returns {number[]}
 */
function workerPids(pid = origin.pid()) {
  let children = '';
  try {
    children = fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
  } catch {
    return [];
  }
  return (children ? children.split(' ') : []).map(Number).filter((child) => {
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
  'three AVIFs at once in two workers (TRANSFORM_WORKERS); idle ones end after TRANSFORM_WORKER_IDLE_S but the last one, which the next AVIF reuses; two malloc arenas each',
  { skip: process.platform !== 'linux' ? 'reads /proc' : false },
  async () => {
    const source = origin.site.add('path.jpg', fs.readFileSync(photo('Path', '1280x800')));
    // three AVIFs at once in three slots: two workers, the third AVIF waiting for one; watched as they run (on
    // a busy machine the first may have idled out before the last answers)
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
    assert.equal(most, 2, 'workers at once');
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

    // it allocates in two malloc arenas (TRANSFORM_WORKER_ARENAS), whatever the origin's own threads have
    assert.equal(environ(origin.pid()).MALLOC_ARENA_MAX, '8');
    assert.equal(environ(last).MALLOC_ARENA_MAX, '2');
  },
);

/** A process's environment as the kernel holds it. @param {number} pid @returns {Record<string, string>} */
const environ = (pid) =>
  Object.fromEntries(
    fs
      .readFileSync(`/proc/${pid}/environ`, 'latin1')
      .split('\0')
      .filter(Boolean)
      .map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]),
  );

/** A pool of this process's own, and the plans of a photograph's variants for it. */
async function poolJobs() {
  const { createWorkerPool } = await import('../src/workers/pool.js');
  const { plan, probe } = await import('../src/pipeline/index.js');
  const { TRANSFORM_OPTIONS } = await import('./harness.js');
  const file = photo('Path', '1280x800');
  const source = await probe(file, { maxPixels: 50e6, maxFrames: 1 });
  const want = (/** @type {number} */ width, /** @type {'avif' | 'jpeg'} */ format) =>
    plan(source, { width, height: null, mode: 'fit', format, accept: '' }, false);
  return { createWorkerPool, file, want, options: TRANSFORM_OPTIONS };
}

test('a job waiting for a worker past its time is a 503, and the worker goes on to the next job', async () => {
  const { createWorkerPool, file, want, options: TRANSFORM_OPTIONS } = await poolJobs();
  const pool = createWorkerPool({ size: 1, nice: 0 });
  try {
    // the one worker starting (~120 ms), then busy with an AVIF; a JPEG behind it with 100 ms to wait
    const slow = pool.run(file, want(1280, 'avif'), TRANSFORM_OPTIONS, 120_000);
    const started = performance.now();
    await assert.rejects(pool.run(file, want(320, 'jpeg'), TRANSFORM_OPTIONS, 100), (err) => {
      assert.equal(/** @type {any} */ (err).status, 503);
      assert.equal(/** @type {any} */ (err).name, 'transform_timeout');
      return true;
    });
    assert.ok(performance.now() - started < 5_000, 'refused at its time, not after the AVIF');
    assert.equal(pool.size, 1, 'no second worker');
    // the next job waits for the AVIF, then is made in the same worker
    const next = pool.run(file, want(400, 'jpeg'), TRANSFORM_OPTIONS, 120_000);
    const made = await slow;
    assert.equal((await decode(made.data)).format, 'heif');
    const image = await decode((await next).data);
    assert.deepEqual([image.format, image.width], ['jpeg', 400]);
    assert.equal(pool.size, 1);
  } finally {
    pool.close();
  }
});

test('a job given to a worker that died idle (its end not yet heard) is made by another, not a 500', async () => {
  const { createWorkerPool, file, want, options: TRANSFORM_OPTIONS } = await poolJobs();
  const pool = createWorkerPool({ size: 1, nice: 0 });
  try {
    await pool.run(file, want(200, 'jpeg'), TRANSFORM_OPTIONS, 120_000);
    const [kept] = workerPids(process.pid);
    // killed, and the next job taken in the same turn of the event loop: the pool still holds it as kept
    process.kill(kept, 'SIGKILL');
    const made = await pool.run(file, want(240, 'jpeg'), TRANSFORM_OPTIONS, 120_000);
    const image = await decode(made.data);
    assert.deepEqual([image.format, image.width], ['jpeg', 240]);
    assert.equal(pool.size, 1);
  } finally {
    pool.close();
  }
});

test("a transform worker loads the pipeline and sharp, not the services' library (45 MB and 100 ms a worker)", async () => {
  const { execFileSync } = await import('node:child_process');
  // every module the worker's imports resolve to, as the module loader sees them
  const script = `
    import { registerHooks } from 'node:module';
    const seen = new Set();
    registerHooks({ resolve(specifier, context, next) { const found = next(specifier, context); seen.add(found.url); return found; } });
    await import(${JSON.stringify(new URL('../src/workers/transform-worker.js', import.meta.url).href)});
    process.stdout.write(JSON.stringify([...seen]));
    process.exit(0);`;
  /** @type {string[]} */
  const loaded = JSON.parse(
    execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' }),
  );
  assert.ok(
    loaded.some((url) => url.endsWith('/origin/src/pipeline/index.js')),
    'the pipeline is loaded',
  );
  const heavy = loaded.filter((url) =>
    /\/lib\/src\/index\.js$|\/node_modules\/(express|ioredis|prom-client|pino|undici)\//.test(url),
  );
  assert.deepEqual(heavy, []);
});

test('no worker can start (no file descriptors left): a 503 unavailable, and the next job, with room, is made', async () => {
  const { execFileSync } = await import('node:child_process');
  // in a process of its own at 128 file descriptors, all taken before the first job
  const script = `
    import fs from 'node:fs';
    const { createWorkerPool } = await import(${JSON.stringify(new URL('../src/workers/pool.js', import.meta.url).href)});
    const { plan, probe } = await import(${JSON.stringify(new URL('../src/pipeline/index.js', import.meta.url).href)});
    const { TRANSFORM_OPTIONS } = await import(${JSON.stringify(new URL('./harness.js', import.meta.url).href)});
    const file = ${JSON.stringify(photo('Path', '1280x800'))};
    const source = await probe(file, { maxPixels: 50e6, maxFrames: 1 });
    const p = plan(source, { width: 320, height: null, mode: 'fit', format: 'jpeg', accept: '' }, false);
    const pool = createWorkerPool({ size: 1, nice: 0 });
    const taken = [];
    try { for (;;) taken.push(fs.openSync('/dev/null', 'r')); } catch {}
    const refused = await pool.run(file, p, TRANSFORM_OPTIONS, 60_000).then(() => null, (err) => [err.status, err.name]);
    for (const fd of taken) fs.closeSync(fd);
    const made = await pool.run(file, p, TRANSFORM_OPTIONS, 60_000);
    pool.close();
    process.stdout.write(JSON.stringify({ taken: taken.length, refused, bytes: made.data.length }));`;
  // a file, not -e: a worker is forked with this process's options, and --input-type would fail it
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'no-fds-'));
  fs.writeFileSync(path.join(dir, 'pool.mjs'), script);
  const out = execFileSync(
    'bash',
    ['-c', 'ulimit -n 128 && exec "$0" "$1"', process.execPath, path.join(dir, 'pool.mjs')],
    {
      encoding: 'utf8',
    },
  );
  fs.rmSync(dir, { recursive: true });
  const { taken, refused, bytes } = JSON.parse(out);
  assert.ok(taken > 0, 'the descriptors were taken');
  assert.deepEqual(refused, [503, 'unavailable']);
  assert.ok(bytes > 1000, 'the next job was made');
});
