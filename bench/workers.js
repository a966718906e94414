// bench/workers: what a transform worker process (origin/src/workers/) costs a set of variants, and what it holds
// after, by its codecs (SYSTEM_CODECS: the system's libjpeg-turbo and libwebp, or sharp's own) and by glibc's
// mmap threshold (MALLOC_MMAP_THRESHOLD_: large buffers given back at once). The set is the frontends' JPEG and
// WebP widths of a 2560-px photograph (condenser's 768 and 1536, ecency's srcset, and the full size) as a warm
// worker makes them: one worker each way, one libvips thread, the ways in turns, CPU read from /proc.
//   node bench/workers.js [--quick]
import '../lib/src/node-version.js';
import fs from 'node:fs';
import { createWorkerPool } from '../origin/src/workers/pool.js';
import { plan, probe } from '../origin/src/pipeline/index.js';
import { TRANSFORM_OPTIONS } from '../origin/test/harness.js';
import { childPids } from '../lib/src/process-tree.js';
import { WALLPAPERS } from '../test/support/images.js';
import { machine, processTreeCpuMs, spread, treePssMb, treeRssMb, writeReport } from './lib.js';

const QUICK = process.argv.includes('--quick');
const ROUNDS = QUICK ? 1 : 5;
const PHOTOS = ['Path', 'Autumn', 'Kite', 'BytheWater'];
const WIDTHS = [320, 600, 768, 800, 1024, 1280, 1536, null];
const WAYS = /** @type {const} */ ([
  { name: 'system codecs', codecs: 'auto', mmap: false },
  { name: 'sharp alone', codecs: 'off', mmap: false },
  { name: 'system codecs, mmap threshold 1 MB', codecs: 'auto', mmap: true },
  { name: 'sharp alone, mmap threshold 1 MB', codecs: 'off', mmap: true },
]);

/**
 * A pool of one worker started the given way (its environment is read when it starts: started here, at once).
 * @param {(typeof WAYS)[number]} way @param {{ file: string, plan: any }} first
 */
async function startWay(way, first) {
  const before = new Set(childPids(process.pid));
  const saved = process.env.MALLOC_MMAP_THRESHOLD_;
  if (way.mmap) process.env.MALLOC_MMAP_THRESHOLD_ = '1048576';
  else delete process.env.MALLOC_MMAP_THRESHOLD_;
  const pool = createWorkerPool({ size: 1, nice: 0, arenas: 2, systemCodecs: way.codecs });
  await pool.run(first.file, first.plan, { ...TRANSFORM_OPTIONS, timeoutS: 60, threads: 1 }, 60_000);
  if (saved === undefined) delete process.env.MALLOC_MMAP_THRESHOLD_;
  else process.env.MALLOC_MMAP_THRESHOLD_ = saved;
  const pid = /** @type {number} */ (childPids(process.pid).find((child) => !before.has(child)));
  return { ...way, pool, pid, cpuPerSet: /** @type {number[]} */ ([]) };
}

export async function benchWorkers() {
  const files = PHOTOS.map((name) => `${WALLPAPERS}/${name}/contents/images/2560x1600.jpg`);
  const jobs = [];
  for (const file of files) {
    const info = await probe(file, { maxPixels: TRANSFORM_OPTIONS.maxPixels, maxFrames: 1 });
    for (const format of ['webp', 'jpeg'])
      for (const width of WIDTHS)
        jobs.push({ file, plan: plan(info, { width, height: null, mode: 'fit', format, accept: '' }, false) });
  }
  const ways = [];
  for (const way of WAYS) ways.push(await startWay(way, jobs[0]));
  for (let round = 0; round < ROUNDS; round += 1) {
    for (const way of ways) {
      const before = processTreeCpuMs(way.pid);
      for (const job of jobs)
        await way.pool.run(job.file, job.plan, { ...TRANSFORM_OPTIONS, timeoutS: 60, threads: 1 }, 60_000);
      way.cpuPerSet.push((processTreeCpuMs(way.pid) - before) / files.length);
    }
  }
  // each worker's memory read once, after the last round: the table and the JSON say the same
  const measured = ways.map(({ name, cpuPerSet, pid }) => ({
    name,
    cpuPerSet,
    memory: { rss: treeRssMb(pid), pss: treePssMb(pid) },
  }));
  const rows = measured.map(({ name, cpuPerSet, memory }) => {
    const cpu = spread(cpuPerSet);
    return [
      name,
      `${Math.round(cpu.min)} / ${Math.round(cpu.median)} / ${Math.round(cpu.max)}`,
      memory.rss,
      memory.pss,
    ];
  });
  for (const way of ways) way.pool.close();
  return {
    ways: measured,
    sections: [
      {
        heading: `A warm worker's set of ${WIDTHS.length * 2} JPEG and WebP variants of a 2560-px photograph, by codecs and mmap threshold`,
        text: `${PHOTOS.length} photographs (${PHOTOS.join(', ')}), widths ${WIDTHS.map((w) => w ?? 'full').join(', ')} in WebP and JPEG, one worker process each way (two malloc arenas, as the origin starts them), one libvips thread, ${ROUNDS} rounds with the ways in turns; CPU of the worker from /proc, its memory after the last round.`,
        table: {
          columns: ['worker', 'CPU ms a set, min / median / max', 'RSS MB after', 'PSS MB after'],
          rows,
        },
      },
    ],
  };
}

if (import.meta.main) {
  const result = await benchWorkers();
  const file = writeReport('workers', {
    title: 'bench/workers',
    command: `node bench/workers.js${QUICK ? ' --quick' : ''}`,
    machine: await machine(),
    sections: result.sections,
    data: result,
  });
  process.stdout.write(`${fs.readFileSync(file, 'utf8')}\n`);
  process.exit(0);
}
