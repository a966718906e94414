// bench/malloc (#47): the origin on glibc's malloc (origin/bin/origin's default: one arena a core) against
// jemalloc (Debian's libjemalloc2 by LD_PRELOAD, as imgproxy's docs recommend), on RSS over a long stretch
// of varied traffic and on throughput. Both origins run at once, on the same machine, and are sent the same
// requests at the same fixed rate (open loop): a mix of real photographs of several sizes, the frontends'
// widths and most of them new (the misses a CDN sends its origin), some repeated (the result cache), in
// JPEG, WebP and AVIF. Every 10 s each origin's RSS (with its workers) is sampled; the report gives RSS over
// time (every tenth of the run: median, and the peak), the CPU each answer cost, p50 and p99. Then each
// origin alone, at saturation (2 connections a core) on new JPEG variants, for req/s.
//   [BENCH_MALLOC_MINUTES=60] [BENCH_MALLOC_RATE=6] node bench/malloc.js [--quick]
import '../lib/src/node-version.js';
import fs from 'node:fs';
import os from 'node:os';
import { Pool } from 'undici';
import { base58Url } from '@stack/lib';
import { startOrigin } from '../origin/test/harness.js';
import { photo } from '../test/support/images.js';
import { drive, machine, percentile, processTreeCpuMs, round, treeRssMb, writeReport } from './lib.js';

const quick = process.argv.includes('--quick');
const MINUTES = quick ? 1 : Number(process.env.BENCH_MALLOC_MINUTES || 60);
const RATE = Number(process.env.BENCH_MALLOC_RATE || 6);
const SATURATION_REQUESTS = quick ? 200 : 2000;
const SATURATION_ROUNDS = 3;
const JEMALLOC = process.env.JEMALLOC || '/usr/lib/x86_64-linux-gnu/libjemalloc.so.2';
/** The sources: six photographs in four sizes (1280×800 to 2560×1600), three of 5120×2880 and two portraits */
const PHOTOS = ['Path', 'Autumn', 'ColdRipple', 'BytheWater', 'Kite', 'FallenLeaf'];
const SOURCES = [
  ...PHOTOS.flatMap((name) => ['1920x1080', '2560x1440', '1280x800', '1600x1200'].map((size) => [name, size])),
  ...['Flow', 'Volna', 'Shell'].map((name) => [name, '5120x2880']),
  ...['Flow', 'Shell'].map((name) => [name, '720x1440']),
];
const WIDTHS = [256, 320, 600, 640, 768, 800, 1024, 1280, 1536];
/** @type {Array<[string, number]>} the formats asked, and their shares */
const FORMATS = [
  ['jpeg', 0.45],
  ['webp', 0.4],
  ['avif', 0.15],
];

/** A small seeded generator (mulberry32): both allocators get the very same requests, run after run. */
function random(seed) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * The paths of the run, in order: 70 % a variant not asked before (a width of the frontends' set, give or
 * take a few pixels), 30 % one of the 200 asked most (Zipf), each in a format by its share.
 * @param {string[]} sources base58 of each source's URL @param {number} count
 */
function trafficPaths(sources, count) {
  const next = random(47);
  const pick = (/** @type {any[]} */ list) => list[Math.floor(next() * list.length)];
  const format = () => {
    let left = next();
    for (const [name, share] of FORMATS) if ((left -= share) < 0) return name;
    return 'jpeg';
  };
  /** @type {string[]} */
  const popular = [];
  const paths = [];
  for (let i = 0; i < count; i++) {
    if (popular.length >= 200 && next() < 0.3) {
      paths.push(popular[Math.min(popular.length - 1, Math.max(0, Math.floor(1 / (next() + 0.005)) - 1))]);
      continue;
    }
    const width = pick(WIDTHS) - Math.floor(next() * 24);
    const fit = next() < 0.2 ? `&height=${Math.round(width * 0.75)}&mode=fit` : '';
    const path = `/p/${pick(sources)}?width=${width}${fit}&format=${format()}`;
    paths.push(path);
    if (popular.length < 200) popular.push(path);
  }
  return paths;
}

/**
 * The run: each origin's i-th path sent to it at the i-th tick of RATE a second (open loop), RSS sampled every
 * 10 s. The lists name the same requests, each by its own origin's image server.
 * @param {Array<{ name: string, origin: Awaited<ReturnType<typeof startOrigin>>, pool: Pool, paths: string[] }>} runs
 */
async function replay(runs) {
  const results = runs.map(() => ({
    latencies: /** @type {number[]} */ ([]),
    failed: 0,
    rss: /** @type {number[]} */ ([]),
  }));
  const cpuBefore = runs.map(({ origin }) => processTreeCpuMs(origin.pid()));
  const sample = () => runs.forEach(({ origin }, i) => results[i].rss.push(treeRssMb(origin.pid())));
  sample();
  const sampler = setInterval(sample, 10_000);
  const started = performance.now();
  const pending = [];
  const count = runs[0].paths.length;
  for (let i = 0; i < count; i++) {
    const wait = started + (i * 1000) / RATE - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    for (const [index, { pool, paths }] of runs.entries()) {
      const sent = performance.now();
      const result = results[index];
      pending.push(
        pool
          .request({ method: 'GET', path: paths[i], headers: { accept: 'image/avif,image/webp,*/*' } })
          .then(async (response) => {
            await response.body.arrayBuffer();
            if (response.statusCode !== 200) result.failed++;
            result.latencies.push(performance.now() - sent);
          })
          .catch(() => result.failed++),
      );
    }
  }
  await Promise.all(pending);
  clearInterval(sampler);
  sample();
  return runs.map(({ name, origin }, i) => ({
    name,
    requests: count,
    failed: results[i].failed,
    cpuMsPerAnswer: (processTreeCpuMs(origin.pid()) - cpuBefore[i]) / count,
    p50: percentile(results[i].latencies, 0.5),
    p99: percentile(results[i].latencies, 0.99),
    rss: results[i].rss,
  }));
}

/**
 * One origin alone at saturation: `count` new JPEG variants about 512 px wide, 2 connections a core; req/s.
 * @param {string} base @param {string[]} sources @param {number} offset (each call's variants are new)
 */
async function saturate(base, sources, offset) {
  const paths = Array.from({ length: SATURATION_REQUESTS }, (_, n) => {
    const i = n + offset;
    return `/p/${sources[i % sources.length]}?width=${480 + (i % 64)}&height=${300 + (Math.floor(i / 64) % 300)}&mode=fit&format=jpeg`;
  });
  return (await drive({ origin: base, paths, concurrency: 2 * os.availableParallelism() })).rps;
}

export async function benchMalloc() {
  if (!fs.existsSync(JEMALLOC)) throw new Error(`${JEMALLOC} missing: apt-get install libjemalloc2`);
  const allocators = { glibc: {}, jemalloc: { LD_PRELOAD: JEMALLOC } };
  const files = SOURCES.map(([name, size]) => ({ name: `${name}-${size}.jpg`, file: photo(name, size) }));
  // the run's requests, each naming its source by its place in the list: rewritten per origin, whose image
  // server has a port of its own
  const template = trafficPaths(
    files.map((_, i) => `{${i}}`),
    Math.round(MINUTES * 60 * RATE),
  );
  /** @type {Array<{ name: string, origin: Awaited<ReturnType<typeof startOrigin>>, pool: Pool, paths: string[], sources: string[] }>} */
  const runs = [];
  try {
    for (const [name, env] of Object.entries(allocators)) {
      const origin = await startOrigin({ LOG_LEVEL: 'warn', TRANSFORM_QUEUE_MAX: '512', ...env });
      // in runs as soon as it runs, so that a failure after this stops it too
      const run = {
        name,
        origin,
        pool: new Pool(origin.base, { connections: 64 }),
        paths: /** @type {string[]} */ ([]),
        sources: /** @type {string[]} */ ([]),
      };
      runs.push(run);
      run.sources = files.map(({ name: file, file: from }) =>
        base58Url.encode(origin.site.add(file, fs.readFileSync(from))),
      );
      run.paths = template.map((path) => path.replace(/\{(\d+)\}/, (_, i) => run.sources[Number(i)]));
    }
    const replayed = await replay(runs);
    // each alone, in turns (glibc, jemalloc, glibc, …): the hour's drift falls on both
    const throughput = runs.map(() => /** @type {number[]} */ ([]));
    for (let round = 0; round < SATURATION_ROUNDS; round++)
      for (const [index, { origin, sources }] of runs.entries())
        throughput[index].push(await saturate(origin.base, sources, round * SATURATION_REQUESTS));
    return report(replayed, throughput, new Set(template).size);
  } finally {
    for (const { origin, pool } of runs) {
      await pool.close();
      await origin.stop();
    }
  }
}

/** @param {Awaited<ReturnType<typeof replay>>} replayed @param {number[][]} throughput @param {number} [distinct] */
function report(replayed, throughput, distinct = 0) {
  // every tenth of the run's samples (at least one each)
  const tenths = (/** @type {number[]} */ rss) =>
    Array.from({ length: 10 }, (_, i) => {
      const from = Math.min(rss.length - 1, Math.floor((i * rss.length) / 10));
      return rss.slice(from, Math.max(from + 1, Math.floor(((i + 1) * rss.length) / 10)));
    });
  const rows = replayed.map((run, i) => [
    run.name,
    run.requests,
    run.failed,
    run.cpuMsPerAnswer,
    run.p50,
    run.p99,
    Math.max(...run.rss),
    percentile(run.rss.slice(Math.floor(run.rss.length * 0.9)), 0.5),
    `${round(percentile(throughput[i], 0.5))} (${round(Math.min(...throughput[i]))}–${round(Math.max(...throughput[i]))})`,
  ]);
  const overTime = replayed.map((run) => [run.name, ...tenths(run.rss).map((part) => percentile(part, 0.5))]);
  const result = {
    title: `bench/malloc: glibc's arenas against jemalloc, ${MINUTES} minutes of varied traffic at ${RATE}/s each`,
    command: `BENCH_MALLOC_MINUTES=${MINUTES} BENCH_MALLOC_RATE=${RATE} node bench/malloc.js${quick ? ' --quick' : ''}`,
    sections: [
      {
        heading: 'Both origins at once, the same requests',
        text: `${SOURCES.length} sources (six photographs in four sizes from 1280×800 to 2560×1600, three of 5120×2880, two portraits of 720×1440); the frontends' widths (${WIDTHS.join(', ')}, less 0–23 px), 20 % with a height (fit); 70 % drawn as new variants, 30 % the 200 first (Zipf): ${distinct} distinct requests of ${replayed[0].requests}; JPEG 45 %, WebP 40 %, AVIF 15 %; Accept: AVIF, WebP. CPU: the origin's process and its workers, per answer. RSS: with its workers, sampled every 10 s. Saturation: each alone afterwards, ${SATURATION_REQUESTS} new JPEG variants about 512 px wide, ${2 * os.availableParallelism()} connections, ${SATURATION_ROUNDS} rounds in turns: median (min–max).`,
        table: {
          columns: [
            'malloc',
            'requests',
            'failed',
            'CPU ms/answer',
            'p50 ms',
            'p99 ms',
            'peak RSS MB',
            'RSS MB (last tenth, median)',
            'saturation req/s',
          ],
          rows,
        },
      },
      {
        heading: 'RSS over the run (MB, the median of each tenth)',
        table: { columns: ['malloc', ...Array.from({ length: 10 }, (_, i) => `${(i + 1) * 10} %`)], rows: overTime },
      },
    ],
    data: { replayed: replayed.map((run) => ({ ...run, rss: run.rss.map(round) })), throughput },
  };
  return result;
}

if (import.meta.main) {
  const result = await benchMalloc();
  const file = writeReport(quick ? 'malloc-quick' : 'malloc', { ...result, machine: await machine() });
  process.stdout.write(`${file}\n`);
}
