// bench/scale (#47): does the origin's throughput grow with its cores? The origin and a minimal sharp server
// (bench/sharp-server.js: local files, sharp's defaults), each pinned to 1, 2, 4, … N cores (taskset), wrk
// pinned to the cores left (or sharing them on the last step of a small machine), 2 connections a core; every
// request a new 512-px variant of a real photograph (nothing from a cache). Per core count and format: req/s,
// req/s per core and its share of the smallest count's, the server's CPU ms a variant, p99 and peak RSS.
// imgproxy is not built here (a cgo module against libvips-dev: see the report's notes).
//   node bench/scale.js [--quick]        BENCH_SCALE_CORES=1,2,4 to choose the counts
import '../lib/src/node-version.js';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { base58Url } from '@stack/lib';
import { startOrigin } from '../origin/test/harness.js';
import { freePort, waitFor } from '../test/support/ports.js';
import { cpuMs, machine, round, sampleRss, wrkAsync, writeReport } from './lib.js';
import { SCRIPT } from './origin.js';
import { photoFiles } from './quality.js';

const quick = process.argv.includes('--quick');
const SECONDS = quick ? 3 : Number(process.env.BENCH_SECONDS || 6);
const FORMATS = quick ? ['jpeg'] : ['jpeg', 'webp', 'avif'];
const TOTAL = os.availableParallelism();
// new variants a run may ask for: variants.lua's box narrows by a pixel every 7,000 requests, so the runs
// together stay within a few pixels of 512
const BLOCK = 6000;
const CORES = (process.env.BENCH_SCALE_CORES || '1,2,4,8,16,32,64')
  .split(',')
  .map(Number)
  .filter((count) => count <= TOTAL);

/** CPUs first..first+count-1 as taskset writes them. @param {number} first @param {number} count */
const cpuRange = (first, count) => (count === 1 ? String(first) : `${first}-${first + count - 1}`);
/** The server's CPUs and wrk's: the rest of the machine, or all of it when nothing is left. @param {number} count */
const layout = (count) => ({
  server: cpuRange(0, count),
  load: count < TOTAL ? cpuRange(count, TOTAL - count) : cpuRange(0, TOTAL),
});

/** Every pid of a process tree (the origin's transform workers included). @param {number} pid @returns {number[]} */
function tree(pid) {
  const children = (() => {
    try {
      return fs
        .readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
        .trim()
        .split(/\s+/)
        .filter(Boolean)
        .map(Number);
    } catch {
      return [];
    }
  })();
  return [pid, ...children.flatMap(tree)];
}

/** CPU ms of a process tree, the pids that ended between two reads left out. @param {number} pid */
const treeCpu = (pid) =>
  tree(pid).reduce(
    (sum, each) =>
      sum +
      (() => {
        try {
          return cpuMs([each]);
        } catch {
          return 0;
        }
      })(),
    0,
  );

/**
 * One wrk run against a server: req/s, p99, CPU ms a variant, peak RSS.
 * @param {{ base: string, pid: number, template: string, sources: string[], first: number, count: number }} run
 */
async function measure({ base, pid, template, sources, first, count }) {
  const { load } = layout(count);
  const rss = sampleRss(pid);
  const cpuBefore = treeCpu(pid);
  const threads = Math.max(1, Math.min(count, TOTAL - count || 1, 4));
  const result = await wrkAsync({
    url: base,
    connections: 2 * count,
    threads,
    seconds: SECONDS,
    script: SCRIPT,
    scriptArgs: [template, String(Math.floor(BLOCK / threads)), String(first), ...sources],
    sharedSession: true,
    cpus: load,
  });
  const peak = rss.stop();
  if (result.requests >= BLOCK / threads) throw new Error(`bench/scale: more answers than new variants (${template})`);
  if (result.non2xx || result.errors !== 'none')
    throw new Error(`bench/scale: ${result.non2xx} answers not 2xx, socket errors ${result.errors} (${template})`);
  const cpu = treeCpu(pid) - cpuBefore;
  return {
    rps: result.rps,
    p99_ms: result.p99_ms,
    cpu_ms_per_variant: cpu / Math.max(1, result.requests),
    peak_rss_mb: peak,
  };
}

/** The minimal sharp server on `cpus`. @param {string} cpus @param {string[]} files */
async function startSharpServer(cpus, files) {
  const port = await freePort();
  const child = spawn('taskset', ['-c', cpus, process.execPath, 'bench/sharp-server.js', String(port), ...files], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/0/8x8.jpeg`)).ok, 15_000, 'the sharp server');
  return { base: `http://127.0.0.1:${port}`, pid: /** @type {number} */ (child.pid), stop: () => child.kill() };
}

export async function benchScale() {
  const files = photoFiles();
  /** @type {Array<{ cores: number, format: string, server: string } & Awaited<ReturnType<typeof measure>>>} */
  const runs = [];
  let first = 0;
  for (const count of CORES) {
    const { server } = layout(count);
    const origin = await startOrigin(
      { LOG_LEVEL: 'warn', TRANSFORM_QUEUE_MAX: '512' },
      { through: ['taskset', '-c', server] },
    );
    const sharpServer = await startSharpServer(server, files);
    try {
      const sources = files.map((file, i) => origin.site.add(`photo-${i}.jpg`, fs.readFileSync(file)));
      for (const source of sources) await fetch(origin.proxied(source, { width: 8 })).then((r) => r.arrayBuffer());
      const encoded = sources.map((source) => base58Url.encode(source));
      const indexes = files.map((_, i) => String(i));
      for (const format of FORMATS) {
        // the origin's result cache would answer a variant asked again: every request a new one ({first} moves on)
        runs.push({
          cores: count,
          format,
          server: 'origin',
          ...(await measure({
            base: origin.base,
            pid: origin.pid(),
            template: `/p/{source}?width={width}&height={height}&mode=fit&format=${format}`,
            sources: encoded,
            first,
            count,
          })),
        });
        first += BLOCK;
        runs.push({
          cores: count,
          format,
          server: 'sharp',
          ...(await measure({
            base: sharpServer.base,
            pid: sharpServer.pid,
            template: `/{source}/{width}x{height}.${format}`,
            sources: indexes,
            first,
            count,
          })),
        });
        first += BLOCK;
      }
    } finally {
      sharpServer.stop();
      await origin.stop();
    }
  }
  return summarise(runs);
}

/** @param {Array<{ cores: number, format: string, server: string, rps: number, p99_ms: number, cpu_ms_per_variant: number, peak_rss_mb: number }>} runs */
function summarise(runs) {
  const perCore = (/** @type {typeof runs[number]} */ run) => run.rps / run.cores;
  const base = (/** @type {typeof runs[number]} */ run) =>
    runs.find((other) => other.server === run.server && other.format === run.format && other.cores === CORES[0]);
  const rows = runs.map((run) => [
    run.cores,
    run.format,
    run.server,
    round(run.rps),
    round(perCore(run)),
    `${Math.round((100 * perCore(run)) / perCore(/** @type {any} */ (base(run))))} %`,
    round(run.cpu_ms_per_variant),
    round(run.p99_ms),
    run.peak_rss_mb,
  ]);
  return {
    runs,
    sections: [
      {
        heading: `Throughput by cores (the server pinned to 1..N cores, wrk on the rest), ${SECONDS} s a run, one run each`,
        text:
          `Cores measured: ${CORES.join(', ')} of ${TOTAL}. Efficiency: req/s per core against the ${CORES[0]}-core run of the same server and format. ` +
          'CPU ms a variant: the server process tree (the origin with its transform workers). Peak RSS: the main process. ' +
          'imgproxy was not measured: it is a cgo build against libvips-dev, not done on this machine.',
        table: {
          columns: [
            'cores',
            'format',
            'server',
            'req/s',
            'req/s a core',
            'efficiency',
            'CPU ms a variant',
            'p99 ms',
            'peak RSS MB',
          ],
          rows,
        },
      },
    ],
  };
}

if (import.meta.main) {
  const result = await benchScale();
  const file = writeReport('scale', {
    title: 'bench/scale: throughput by cores',
    command: `node bench/scale.js${quick ? ' --quick' : ''}`,
    machine: await machine(),
    sections: result.sections,
    data: result.runs,
  });
  process.stdout.write(`${file}\n`);
}
