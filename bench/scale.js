// bench/scale (#47): does the origin's throughput grow with its cores? The origin and a minimal sharp server
// (bench/sharp-server.js: local files, sharp's defaults), each pinned to 1, 2, 4, … N cores (taskset), wrk
// pinned to the cores left (or sharing them on the last step of a small machine), 2 connections a core; every
// request a new 512-px variant of a real photograph (nothing from a cache). Per core count and format: req/s,
// req/s per core and its share of the smallest count's, the server's CPU ms a variant, p99 and peak RSS.
// Where the CPU goes is read from /proc by thread (the event loop, libuv's pool, libvips, V8, the workers).
// imgproxy is not measured: the Go module proxy here refuses its module (see the report's notes).
//   node bench/scale.js [--quick]        BENCH_SCALE_CORES=1,2,4 to choose the counts, BENCH_SCALE_SERVERS=origin,sharp,
//   BENCH_SCALE_FORMATS=jpeg,webp,avif, BENCH_SCALE_REPORT=scale (the report's name)
//   BENCH_SCALE_ORIGINS='{"default": {}, "one-thread": {"TRANSFORM_THREADS": "1"}}' to compare origin settings;
//   a setting BENCH_PROCESSES=K starts K origins on K slices of the cores, each asked by its own wrk;
//   BENCH_SCALE_CONNECTIONS=2 wrk's connections a core (each waits for its answer before it asks again)
import '../lib/src/node-version.js';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { base58Url } from '@stack/lib';
import { startOrigin } from '../origin/test/harness.js';
import { freePort, waitFor } from '../test/support/ports.js';
import { benchSettings, machine, processTree, statCpuMs, round, sampleRss, wrkAsync, writeReport } from './lib.js';
import { SCRIPT } from './origin.js';
import { photoFiles } from './quality.js';

const quick = process.argv.includes('--quick');
const SECONDS = quick ? 3 : Number(process.env.BENCH_SECONDS || 6);
const FORMATS = quick ? ['jpeg'] : (process.env.BENCH_SCALE_FORMATS || 'jpeg,webp,avif').split(',');
const TOTAL = os.availableParallelism();
// new variants a run may ask for: a variant must be new only to the server it is asked of (each core count
// starts a new origin with an empty result cache) in its format, so every run numbers its requests from 0;
// variants.lua's box narrows by a pixel every 7,000 requests, so a run's images stay within 4 px of 512 wide
const BLOCK = 28_000;
const CORES = (process.env.BENCH_SCALE_CORES || '1,2,4,8,16,32,64')
  .split(',')
  .map(Number)
  .filter((count) => count <= TOTAL);
const SERVERS = (process.env.BENCH_SCALE_SERVERS || 'origin,sharp').split(',');
const CONNECTIONS = Number(process.env.BENCH_SCALE_CONNECTIONS || 2);
/**
 * The origin's settings to compare, by name: `{"default": {}}` unless BENCH_SCALE_ORIGINS (JSON) names others,
 * e.g. `{"default": {}, "one-thread": {"TRANSFORM_THREADS": "1"}}`.
 * @type {Record<string, Record<string, string>>}
 */
const ORIGINS = JSON.parse(process.env.BENCH_SCALE_ORIGINS || '{"default": {}}');

/** CPUs first..first+count-1 as taskset writes them. @param {number} first @param {number} count */
const cpuRange = (first, count) => (count === 1 ? String(first) : `${first}-${first + count - 1}`);
/** The server's CPUs and wrk's: the rest of the machine, or all of it when nothing is left. @param {number} count */
const layout = (count) => ({
  server: cpuRange(0, count),
  load: count < TOTAL ? cpuRange(count, TOTAL - count) : cpuRange(0, TOTAL),
  loadCount: count < TOTAL ? TOTAL - count : TOTAL,
});

/** The thread group a thread of the server's own process counts in, by its name. @param {string} name */
const groupOf = (name) =>
  name === 'MainThread' || name === 'node'
    ? 'event loop'
    : name.startsWith('libuv')
      ? 'libuv pool'
      : name.startsWith('libvips') || name.startsWith('vips')
        ? 'libvips'
        : name.startsWith('V8')
          ? 'V8'
          : name === 'WorkerThread'
            ? 'transform loops'
            : 'other';
const GROUPS = ['event loop', 'transform loops', 'libuv pool', 'libvips', 'V8', 'workers', 'other'];

/**
 * CPU ms of a process tree by thread group: the server's own threads by name, its child processes (the
 * origin's transform workers) as `workers`; threads that ended count in `other`. @param {number} pid
 * @returns {Record<string, number>}
 */
function treeCpu(pid) {
  /** @type {Record<string, number>} */
  const by = Object.fromEntries(GROUPS.map((group) => [group, 0]));
  for (const each of processTree(pid).slice(1)) by.workers += statCpuMs(`/proc/${each}/stat`);
  let threads = 0;
  let tasks = [];
  try {
    tasks = fs.readdirSync(`/proc/${pid}/task`);
  } catch {
    // the process is gone
  }
  for (const task of tasks) {
    const ms = statCpuMs(`/proc/${pid}/task/${task}/stat`);
    let name = '';
    try {
      name = fs.readFileSync(`/proc/${pid}/task/${task}/comm`, 'utf8').trim();
    } catch {
      continue;
    }
    by[groupOf(task === String(pid) ? 'MainThread' : name)] += ms;
    threads += ms;
  }
  by.other += Math.max(0, statCpuMs(`/proc/${pid}/stat`) - threads);
  return by;
}

/** The CPU ms between two readings, by group. @param {Record<string, number>} before @param {Record<string, number>} after */
const spent = (before, after) => Object.fromEntries(GROUPS.map((group) => [group, after[group] - before[group]]));

/**
 * One wrk run against each of a server's processes at once (one, or the origins of a BENCH_PROCESSES run, each on
 * its own slice of the cores): req/s and CPU ms together, the worst p99, the processes' peak RSS together.
 * @param {{ targets: Array<{ base: string, pid: number, sources: string[] }>, template: string, count: number }} run
 */
async function measure({ targets, template, count }) {
  const { load, loadCount } = layout(count);
  const rss = targets.map(({ pid }) => sampleRss(pid, { pss: true }));
  const cpuBefore = targets.map(({ pid }) => treeCpu(pid));
  const threads = targets.length > 1 ? 1 : Math.min(2, loadCount);
  const results = await Promise.all(
    targets.map(({ base, sources }) =>
      wrkAsync({
        url: base,
        connections: Math.max(1, Math.round((CONNECTIONS * count) / targets.length)),
        threads,
        seconds: SECONDS,
        script: SCRIPT,
        scriptArgs: [template, String(Math.floor(BLOCK / threads)), '0', ...sources],
        sharedSession: true,
        cpus: load,
        // an AVIF on one core takes ~0.5 s; two connections queue behind it
        timeoutS: 10,
      }),
    ),
  );
  const peak = rss.reduce((sum, each) => sum + each.stop(), 0);
  const peakPss = rss.reduce((sum, each) => sum + each.peakPss(), 0);
  for (const result of results) {
    if (result.requests >= BLOCK / threads)
      throw new Error(`bench/scale: more answers than new variants (${template})`);
    if (result.non2xx || result.errors !== 'none')
      throw new Error(`bench/scale: ${result.non2xx} answers not 2xx, socket errors ${result.errors} (${template})`);
  }
  /** @type {Record<string, number>} */
  const cpu = Object.fromEntries(GROUPS.map((group) => [group, 0]));
  targets.forEach(({ pid }, i) => {
    for (const [group, ms] of Object.entries(spent(cpuBefore[i], treeCpu(pid)))) cpu[group] += ms;
  });
  const requests = Math.max(
    1,
    results.reduce((sum, result) => sum + result.requests, 0),
  );
  return {
    rps: results.reduce((sum, result) => sum + result.rps, 0),
    p99_ms: Math.max(...results.map((result) => result.p99_ms)),
    cpu_ms_per_variant: Object.values(cpu).reduce((sum, ms) => sum + ms, 0) / requests,
    cpu_ms_by_group: Object.fromEntries(
      Object.entries(cpu).map(([group, ms]) => [group, Math.round((100 * ms) / requests) / 100]),
    ),
    peak_rss_mb: peak,
    peak_pss_mb: peakPss,
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

/**
 * Every server at `count` cores, each format: the origin under each of ORIGINS' settings, then the sharp server.
 * @param {number} count @param {string[]} files
 */
async function atCores(count, files) {
  const { server } = layout(count);
  const runs = [];
  for (const [name, { BENCH_PROCESSES = '1', ...settings }] of SERVERS.includes('origin')
    ? Object.entries(ORIGINS)
    : []) {
    // BENCH_PROCESSES: that many origins, each pinned to its own slice of the cores, each asked by its own wrk
    const processes = Math.min(count, Number(BENCH_PROCESSES));
    const slice = Math.floor(count / processes);
    const origins = [];
    try {
      for (let i = 0; i < processes; i++)
        origins.push(
          await startOrigin(
            { LOG_LEVEL: 'warn', TRANSFORM_QUEUE_MAX: '512', ...settings },
            { through: ['taskset', '-c', processes === 1 ? server : cpuRange(i * slice, slice)] },
          ),
        );
      const targets = [];
      for (const origin of origins) {
        const sources = files.map((file, i) => origin.site.add(`photo-${i}.jpg`, fs.readFileSync(file)));
        for (const source of sources) await fetch(origin.proxied(source, { width: 8 })).then((r) => r.arrayBuffer());
        targets.push({
          base: origin.base,
          pid: origin.pid(),
          sources: sources.map((source) => base58Url.encode(source)),
        });
      }
      for (const format of FORMATS) {
        const template = `/p/{source}?width={width}&height={height}&mode=fit&format=${format}`;
        const run = await measure({ targets, template, count });
        runs.push({ cores: count, format, server: name === 'default' ? 'origin' : `origin ${name}`, ...run });
      }
    } finally {
      for (const origin of origins) await origin.stop();
    }
  }
  if (!SERVERS.includes('sharp')) return runs;
  const sharpServer = await startSharpServer(server, files);
  try {
    const indexes = files.map((_, i) => String(i));
    for (const format of FORMATS) {
      const template = `/{source}/{width}x{height}.${format}`;
      const targets = [{ base: sharpServer.base, pid: sharpServer.pid, sources: indexes }];
      const run = await measure({ targets, template, count });
      runs.push({ cores: count, format, server: 'sharp', ...run });
    }
  } finally {
    sharpServer.stop();
  }
  return runs;
}

export async function benchScale() {
  const files = photoFiles();
  const runs = [];
  for (const count of CORES) runs.push(...(await atCores(count, files)));
  return summarise(runs);
}

/**
 * @typedef {{ cores: number, format: string, server: string, rps: number, p99_ms: number, cpu_ms_per_variant: number,
 *   cpu_ms_by_group: Record<string, number>, peak_rss_mb: number, peak_pss_mb?: number }} Run
 */

/** @param {Run[]} runs */
function summarise(runs) {
  const perCore = (/** @type {Run} */ run) => run.rps / run.cores;
  /** The same server's run of the same format at `cores`. @param {Run} run @param {number} cores */
  const at = (run, cores) =>
    runs.find((other) => other.server === run.server && other.format === run.format && other.cores === cores);
  /** run's req/s a core against the same server's at `cores`. @param {Run} run @param {number} cores */
  const share = (run, cores) => {
    const other = at(run, cores);
    return other ? `${Math.round((100 * perCore(run)) / perCore(other))} %` : '';
  };
  const rows = runs.map((run) => [
    run.cores,
    run.format,
    run.server,
    round(run.rps),
    round(perCore(run)),
    share(run, CORES[0]),
    share(run, 2),
    round(run.cpu_ms_per_variant),
    round(run.p99_ms),
    run.peak_rss_mb,
    run.peak_pss_mb ?? '',
  ]);
  const where = runs.map((run) => [run.cores, run.format, run.server, ...GROUPS.map((g) => run.cpu_ms_by_group[g])]);
  const settings = Object.entries(ORIGINS)
    .filter(([name]) => name !== 'default')
    .map(([name, env]) => `\`origin ${name}\`: ${JSON.stringify(env)}`);
  return {
    runs,
    sections: [
      {
        heading: `Throughput by cores (the server pinned to 1..N cores, wrk on the rest), ${SECONDS} s a run, one run each`,
        text:
          `Cores measured: ${CORES.join(', ')} of ${TOTAL}. Efficiency: req/s per core against the same server's and format's ` +
          `run at ${CORES[0]} core(s), and at 2 cores (#47's target: at least 85 % at 16). ` +
          'CPU ms a variant: the server process tree (the origin with its transform workers). Peak RSS: the process tree as well (the transform workers make the AVIFs; before 2026-11-27 the main process alone), the RSS of each process counting the pages it shares with the others (the code of Node and libvips); peak PSS: each such page once, as the memory of a container counts it (read every 200 ms). ' +
          `wrk runs on the cores the server is not pinned to (on the last step of a machine it shares them), ${CONNECTIONS} connections a core, each asking again as soon as it has its answer. ` +
          (settings.length ? `Origin settings compared: ${settings.join('; ')}. ` : '') +
          'imgproxy was not measured: the Go module proxy reachable here refuses github.com/imgproxy/imgproxy ' +
          '(v3 and v4, every version tried: 403 "This module version is not available").',
        table: {
          columns: [
            'cores',
            'format',
            'server',
            'req/s',
            'req/s a core',
            `vs ${CORES[0]} core`,
            'vs 2 cores',
            'CPU ms a variant',
            'p99 ms',
            'peak RSS MB',
            'peak PSS MB',
          ],
          rows,
        },
      },
      {
        heading: 'Where the CPU goes: ms a variant by thread',
        text:
          "The server's own threads by name (the event loop: Node's main thread; the origin's transform loops: " +
          "its worker threads that drive transforms (TRANSFORM_LOOPS); libuv's pool: file reads and the " +
          "origin's system-codec decodes and encodes, and sharp's pipelines; libvips' worker threads; V8's helpers: " +
          "the garbage collector and the compiler), its child processes (the origin's transform workers: AVIF), " +
          'and threads that ended between the readings.',
        table: { columns: ['cores', 'format', 'server', ...GROUPS], rows: where },
      },
    ],
  };
}

/** Physical cores and the CPUs that share one (hyper-threads), as Linux lists them. */
function topology() {
  const siblings = new Set();
  for (let cpu = 0; cpu < TOTAL; cpu++) {
    try {
      siblings.add(fs.readFileSync(`/sys/devices/system/cpu/cpu${cpu}/topology/thread_siblings_list`, 'utf8').trim());
    } catch {
      // not listed
    }
  }
  return `${siblings.size} physical cores for ${TOTAL} CPUs: ${[...siblings].join(' ')}`;
}

if (import.meta.main) {
  const result = await benchScale();
  const file = writeReport(process.env.BENCH_SCALE_REPORT || 'scale', {
    title: 'bench/scale: throughput by cores',
    command: `${benchSettings()}node bench/scale.js${quick ? ' --quick' : ''}`,
    machine: { ...(await machine()), topology: topology() },
    sections: result.sections,
    data: result.runs,
  });
  process.stdout.write(`${file}\n`);
}
