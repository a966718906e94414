// bench/origin: uncached transforms of real photographs (512×512 fit, JPEG q80 and WebP) through the
// service at concurrency 2/4/8 against in-process sharp doing the same work in the same run (alternating),
// repeated variants (result cache), and peak RSS with 64 concurrent requests for 24-megapixel images.
//   node bench/origin.js [--quick]
import '../lib/src/node-version.js';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { base58Url } from '@stack/lib';
import { startOrigin } from '../origin/test/harness.js';
import { metricValue } from '../test/support/metrics.js';
import { waitFor } from '../test/support/ports.js';
import { drive, filesystem, machine, percentile, round, sampleRss, spread, wrk, wrkAsync, writeReport } from './lib.js';
import { photoFiles } from './quality.js';

const quick = process.argv.includes('--quick');
// real photographs from Debian's plasma-workspace-wallpapers (2560×1600 JPEGs, whatever their file names say)
export const SECONDS = quick ? 3 : Number(process.env.BENCH_SECONDS || 5);
export const SCRIPT = path.join(import.meta.dirname, 'variants.lua');
const PATHS_SCRIPT = path.join(import.meta.dirname, 'paths.lua');
// each wrk run numbers its requests from its own block (bench/variants.lua): no run repeats a variant
export const BLOCK = 2000;
// five runs each: on this shared 2-core VM single runs vary by ±5 %, and the target is a ratio of medians
const REPEATS = quick ? 1 : 5;
const CONCURRENCIES = [2, 4, 8];
const FORMATS = ['jpeg', 'webp'];
// where the origin under test keeps its store and caches (each fetched original a file, the variants appended
// to segment files); the report says on which filesystem (see filesystem() in lib.js for why it matters)
const DATA_PARENT = process.env.BENCH_DATA_DIR || os.tmpdir();

export async function benchOrigin() {
  const files = photoFiles();
  const origin = await startOrigin({ LOG_LEVEL: 'warn', TRANSFORM_QUEUE_MAX: '128' }, { dataParent: DATA_PARENT });
  const sources = files.map((file, i) => origin.site.add(`photo-${i}.jpg`, fs.readFileSync(file)));
  const env = { MALLOC_ARENA_MAX: '2', UV_THREADPOOL_SIZE: String(os.availableParallelism() * 2 + 4) };
  try {
    // originals fetched once: what is measured is the variant work (the two-level store at work)
    for (const source of sources) await fetch(origin.proxied(source, { width: 8 })).then((r) => r.arrayBuffer());
    const encoded = sources.map((source) => base58Url.encode(source));
    let first = 0;
    const uncached = [];
    const rss = sampleRss(origin.pid());
    for (const format of FORMATS) {
      for (const concurrency of CONCURRENCIES) {
        const service = [];
        const inProcess = [];
        for (let repeat = 0; repeat < REPEATS; repeat += 1) {
          service.push(await uncachedRun(origin, rss, { format, concurrency, first, encoded }));
          first += BLOCK;
          // the same number of the same transforms, in-process
          const count = Math.max(service[service.length - 1].requests, 20);
          const out = execFileSync(
            'node',
            ['bench/sharp-inprocess.js', format, String(concurrency), String(count), ...files],
            { env: { ...process.env, ...env }, encoding: 'utf8' },
          );
          inProcess.push(JSON.parse(out));
        }
        uncached.push({ format, concurrency, service, inProcess });
      }
    }
    const cachedPaths = encoded.flatMap((source) =>
      [1, 2, 3, 4, 5].map((i) => `/p/${source}?width=400&height=${400 + i}&mode=fit&format=webp`),
    );
    await drive({ origin: origin.base, paths: cachedPaths, concurrency: 4 });
    // every answer from the result cache: wrk, since a Node client tops out below the origin here
    const repeated = wrk({
      url: origin.base,
      connections: 16,
      threads: 2,
      seconds: SECONDS,
      script: PATHS_SCRIPT,
      scriptArgs: cachedPaths,
      sharedSession: true,
    });
    if (repeated.non2xx || repeated.errors !== 'none')
      throw new Error(`bench/origin: repeated variants: ${repeated.non2xx} not 2xx, socket errors ${repeated.errors}`);

    // 24-megapixel sources, 64 concurrent distinct requests: memory must stay flat
    const big = await sharp(files[0]).resize(6000, 4000, { fit: 'fill' }).jpeg({ quality: 90 }).toBuffer();
    const bigSources = Array.from({ length: 8 }, (_, i) => origin.site.add(`big-${i}.jpg`, big));
    for (const source of bigSources) await fetch(origin.proxied(source, { width: 8 })).then((r) => r.arrayBuffer());
    rss.reset();
    const memory = await drive({
      origin: origin.base,
      concurrency: 64,
      paths: Array.from(
        { length: 64 },
        (_, i) => `/p/${base58Url.encode(bigSources[i % 8])}?width=512&height=${600 + i}&mode=fit&format=jpeg`,
      ),
    });
    const memoryPeak = rss.stop();
    return summarise(uncached, repeated, memory, memoryPeak);
  } finally {
    await origin.stop();
  }
}

/**
 * One wrk run of new variants against the service, sharing this session (and so the CPU, thread by thread)
 * with the origin, as the in-process runs do. wrk, not a Node client: a Node client's own CPU per answer
 * (about 1 ms, some 3% of a transform) would be charged to the service on this shared machine.
 * Every answer must be a variant made for it (a cache hit would flatter the service): checked on the
 * origin's transform counter. Waits until the transforms wrk left in flight at its deadline are done.
 * @param {Awaited<ReturnType<typeof startOrigin>>} origin @param {ReturnType<typeof sampleRss>} rss
 * @param {{ format: string, concurrency: number, first: number, encoded: string[] }} run
 */
export async function uncachedRun(origin, rss, { format, concurrency, first, encoded }) {
  const made = () => metricValue(origin.metricsUrl, 'origin_transforms_total', { format });
  const before = await made();
  const threads = Math.min(2, concurrency);
  rss.reset();
  // wrkAsync: the RSS sampler (a timer in this process) keeps sampling while wrk runs
  const result = await wrkAsync({
    url: origin.base,
    connections: concurrency,
    threads,
    seconds: SECONDS,
    script: SCRIPT,
    scriptArgs: [
      `/p/{source}?width={width}&height={height}&mode=fit&format=${format}`,
      String(BLOCK / threads),
      String(first),
      ...encoded,
    ],
    sharedSession: true,
  });
  const peak = rss.stop();
  await waitFor(
    async () => (await metricValue(origin.metricsUrl, 'origin_transforms_in_flight')) === 0,
    30_000,
    'the transforms wrk left behind',
  );
  const transforms = (await made()) - before;
  if (result.requests >= BLOCK / threads || transforms < result.requests || result.non2xx) {
    throw new Error(
      `bench/origin: ${result.requests} answers (${result.non2xx} not 2xx) but ${transforms} transforms: not all new variants`,
    );
  }
  return { ...result, transforms, peak_rss_mb: peak };
}

/** @param {any[]} uncached @param {any} repeated @param {any} memory @param {number} memoryPeak */
function summarise(uncached, repeated, memory, memoryPeak) {
  const rows = uncached.map(({ format, concurrency, service, inProcess }) => {
    const s = spread(service.map((/** @type {any} */ r) => r.rps));
    const p = spread(inProcess.map((/** @type {any} */ r) => r.rps));
    return [
      format,
      concurrency,
      `${round(s.min)} / ${round(s.median)} / ${round(s.max)}`,
      percentile(
        service.map((/** @type {any} */ r) => r.p50_ms),
        0.5,
      ),
      percentile(
        service.map((/** @type {any} */ r) => r.p99_ms),
        0.5,
      ),
      Math.max(...service.map((/** @type {any} */ r) => r.peak_rss_mb)),
      Math.round(service[0].bytes / service[0].requests / 1024),
      `${round(p.min)} / ${round(p.median)} / ${round(p.max)}`,
      s.median / p.median,
    ];
  });
  /** @type {Record<string, { service: number, inProcess: number, ratio: number }>} */
  const best = {};
  for (const format of FORMATS) {
    const mine = uncached.filter((entry) => entry.format === format);
    const service = Math.max(...mine.map((entry) => spread(entry.service.map((/** @type {any} */ r) => r.rps)).median));
    const inProcess = Math.max(
      ...mine.map((entry) => spread(entry.inProcess.map((/** @type {any} */ r) => r.rps)).median),
    );
    best[format] = { service, inProcess, ratio: service / inProcess };
  }
  const data = filesystem(DATA_PARENT);
  const journal = data.journal === undefined ? '' : data.journal ? ', with a journal' : ', without a journal';
  return {
    best,
    repeated,
    memory: { ...memory, peak_rss_mb: memoryPeak },
    data,
    sections: [
      {
        heading: 'Uncached variants: service vs in-process sharp (same run, alternating)',
        text: `Service: wrk for ${SECONDS} s per run (\`${uncached[0].service[0].command.replace(/ -- .*/, ' -- …')}\`), every answer a new variant (checked on the origin's transform counter); in-process: the same number of the same transforms. ${REPEATS} runs each; req/s as min / median / max; originals cached (the second level of the store). The origin's store and caches under ${data.dir} (${data.type} on ${data.source}${journal}): each new variant is appended to a segment file there.`,
        table: {
          columns: [
            'format',
            'concurrency',
            'service req/s',
            'p50 ms',
            'p99 ms',
            'peak RSS MB',
            'KB per answer',
            'in-process req/s',
            'ratio (median)',
          ],
          rows,
        },
      },
      {
        heading: 'Best concurrency: service / in-process (target ≥ 90%)',
        table: {
          columns: ['format', 'service req/s', 'in-process req/s', 'ratio'],
          rows: Object.entries(best).map(([format, b]) => [
            format,
            b.service,
            b.inProcess,
            `${Math.round(b.ratio * 100)}%`,
          ]),
        },
      },
      {
        heading: 'Repeated variants (result cache)',
        text: `wrk for ${SECONDS} s, 16 connections, 30 variants in turn (\`${repeated.command.replace(/ -- .*/, ' -- …')}\`).`,
        table: {
          columns: ['requests', 'concurrency', 'req/s', 'p50 ms', 'p99 ms'],
          rows: [[repeated.requests, 16, repeated.rps, repeated.p50_ms, repeated.p99_ms]],
        },
      },
      {
        heading: '64 concurrent requests for 24-megapixel images (target: peak RSS < 512 MB)',
        table: {
          columns: ['answers', 'seconds', 'p99 ms', 'peak RSS MB'],
          rows: [[JSON.stringify(memory.statuses), memory.seconds, memory.p99_ms, memoryPeak]],
        },
      },
    ],
  };
}

if (import.meta.main) {
  const result = await benchOrigin();
  // a run with other transform slots than the default is a report of its own, and says so
  // so is one with the origin's data elsewhere than the temp directory
  const slots = process.env.TRANSFORM_CONCURRENCY;
  const elsewhere = process.env.BENCH_DATA_DIR ? result.data.type : '';
  const settings = `${slots ? `TRANSFORM_CONCURRENCY=${slots} ` : ''}${elsewhere ? `BENCH_DATA_DIR=${process.env.BENCH_DATA_DIR} ` : ''}`;
  const file = writeReport(
    ['origin', slots && `slots-${slots}`, elsewhere && `data-${elsewhere}`].filter(Boolean).join('-'),
    {
      title: settings ? `bench/origin with ${settings.trim()}` : 'bench/origin',
      command: `${settings}node bench/origin.js${quick ? ' --quick' : ''}`,
      machine: await machine(),
      sections: result.sections,
      data: result,
    },
  );
  process.stdout.write(`${fs.readFileSync(file, 'utf8')}\n`);
  process.exit(0);
}
