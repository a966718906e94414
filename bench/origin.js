// bench/origin: uncached transforms of real photographs (512×512 fit, JPEG q80 and WebP) through the
// service at concurrency 2/4/8 against in-process sharp doing the same work in the same run (alternating),
// repeated variants (result cache), and peak RSS with 64 concurrent requests for 24-megapixel images.
//   node bench/origin.js [--quick]
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { base58Url } from '@stack/lib';
import { startOrigin } from '../origin/test/harness.js';
import { photo } from '../test/support/images.js';
import { drive, machine, percentile, round, sampleRss, spread, writeReport } from './lib.js';

const quick = process.argv.includes('--quick');
// real photographs from Debian's plasma-workspace-wallpapers (2560×1600 JPEGs, whatever their file names say)
const PHOTOS = ['Path', 'Autumn', 'ColdRipple', 'BytheWater', 'Kite', 'FallenLeaf'].map((name) => [name, '1920x1080']);
const REQUESTS = quick ? 40 : Number(process.env.BENCH_REQUESTS || 180);
const REPEATS = quick ? 1 : 3;
const CONCURRENCIES = [2, 4, 8];
const FORMATS = ['jpeg', 'webp'];

export async function benchOrigin() {
  const files = PHOTOS.map(([name, size]) => photo(name, size));
  const origin = await startOrigin({ LOG_LEVEL: 'warn', TRANSFORM_QUEUE_MAX: '128' });
  const sources = files.map((file, i) => origin.site.add(`photo-${i}.jpg`, fs.readFileSync(file)));
  const env = { MALLOC_ARENA_MAX: '2', UV_THREADPOOL_SIZE: String(os.availableParallelism() * 2 + 4) };
  try {
    // originals fetched once: what is measured is the variant work (the two-level store at work)
    for (const source of sources) await fetch(origin.proxied(source, { width: 8 })).then((r) => r.arrayBuffer());
    let box = 0;
    const pathsFor = (/** @type {string} */ format) => Array.from({ length: REQUESTS }, (_, i) => {
      box += 1; // a new box height each request: a new variant key, the same pixels (fit inside 512 × 512+)
      return `/p/${base58Url.encode(sources[i % sources.length])}?width=512&height=${512 + box}&mode=fit&format=${format}`;
    });
    const uncached = [];
    const rss = sampleRss(origin.pid());
    for (const format of FORMATS) {
      for (const concurrency of CONCURRENCIES) {
        const service = [];
        const inProcess = [];
        for (let repeat = 0; repeat < REPEATS; repeat += 1) {
          rss.reset();
          const result = await drive({ origin: origin.base, paths: pathsFor(format), concurrency });
          service.push({ ...result, peak_rss_mb: rss.stop() });
          const out = execFileSync('node', ['bench/sharp-inprocess.js', format, String(concurrency), String(REQUESTS), ...files], { env: { ...process.env, ...env }, encoding: 'utf8' });
          inProcess.push(JSON.parse(out));
        }
        uncached.push({ format, concurrency, service, inProcess });
      }
    }
    const cachedPaths = pathsFor('webp').slice(0, 30);
    await drive({ origin: origin.base, paths: cachedPaths, concurrency: 4 });
    const repeated = await drive({ origin: origin.base, paths: Array.from({ length: 3000 }, (_, i) => cachedPaths[i % cachedPaths.length]), concurrency: 16 });

    // 24-megapixel sources, 64 concurrent distinct requests: memory must stay flat
    const big = await sharp(files[0]).resize(6000, 4000, { fit: 'fill' }).jpeg({ quality: 90 }).toBuffer();
    const bigSources = Array.from({ length: 8 }, (_, i) => origin.site.add(`big-${i}.jpg`, big));
    for (const source of bigSources) await fetch(origin.proxied(source, { width: 8 })).then((r) => r.arrayBuffer());
    rss.reset();
    const memory = await drive({ origin: origin.base, concurrency: 64, paths: Array.from({ length: 64 }, (_, i) => `/p/${base58Url.encode(bigSources[i % 8])}?width=512&height=${600 + i}&mode=fit&format=jpeg`) });
    const memoryPeak = rss.stop();
    return summarise(uncached, repeated, memory, memoryPeak);
  } finally {
    await origin.stop();
  }
}

/** @param {any[]} uncached @param {any} repeated @param {any} memory @param {number} memoryPeak */
function summarise(uncached, repeated, memory, memoryPeak) {
  const rows = uncached.map(({ format, concurrency, service, inProcess }) => {
    const s = spread(service.map((/** @type {any} */ r) => r.rps));
    const p = spread(inProcess.map((/** @type {any} */ r) => r.rps));
    return [format, concurrency, `${round(s.min)} / ${round(s.median)} / ${round(s.max)}`, percentile(service.map((/** @type {any} */ r) => r.p50_ms), 0.5), percentile(service.map((/** @type {any} */ r) => r.p99_ms), 0.5),
      Math.max(...service.map((/** @type {any} */ r) => r.peak_rss_mb)), Math.round(service[0].bytes / service[0].requests / 1024), `${round(p.min)} / ${round(p.median)} / ${round(p.max)}`, s.median / p.median];
  });
  /** @type {Record<string, { service: number, inProcess: number, ratio: number }>} */
  const best = {};
  for (const format of FORMATS) {
    const mine = uncached.filter((entry) => entry.format === format);
    const service = Math.max(...mine.map((entry) => spread(entry.service.map((/** @type {any} */ r) => r.rps)).median));
    const inProcess = Math.max(...mine.map((entry) => spread(entry.inProcess.map((/** @type {any} */ r) => r.rps)).median));
    best[format] = { service, inProcess, ratio: service / inProcess };
  }
  return {
    best, repeated, memory: { ...memory, peak_rss_mb: memoryPeak },
    sections: [
      { heading: 'Uncached variants: service vs in-process sharp (same run, alternating)', text: `${REQUESTS} requests per run, ${REPEATS} runs each; req/s as min / median / max; originals cached (the second level of the store), every variant new.`,
        table: { columns: ['format', 'concurrency', 'service req/s', 'p50 ms', 'p99 ms', 'peak RSS MB', 'KB out', 'in-process req/s', 'ratio (median)'], rows } },
      { heading: 'Best concurrency: service / in-process (target ≥ 90%)', table: { columns: ['format', 'service req/s', 'in-process req/s', 'ratio'], rows: Object.entries(best).map(([format, b]) => [format, b.service, b.inProcess, `${Math.round(b.ratio * 100)}%`]) } },
      { heading: 'Repeated variants (result cache)', table: { columns: ['requests', 'concurrency', 'req/s', 'p50 ms', 'p99 ms'], rows: [[repeated.requests, 16, repeated.rps, repeated.p50_ms, repeated.p99_ms]] } },
      { heading: '64 concurrent requests for 24-megapixel images (target: peak RSS < 512 MB)', table: { columns: ['answers', 'seconds', 'p99 ms', 'peak RSS MB'], rows: [[JSON.stringify(memory.statuses), memory.seconds, memory.p99_ms, memoryPeak]] } },
    ],
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const result = await benchOrigin();
  // a run with other transform slots than the default is a report of its own, and says so
  const slots = process.env.TRANSFORM_CONCURRENCY;
  const file = writeReport(slots ? `origin-slots-${slots}` : 'origin', {
    title: slots ? `bench/origin with TRANSFORM_CONCURRENCY=${slots}` : 'bench/origin',
    command: `${slots ? `TRANSFORM_CONCURRENCY=${slots} ` : ''}node bench/origin.js${quick ? ' --quick' : ''}`,
    machine: await machine(), sections: result.sections, data: result,
  });
  process.stdout.write(`${fs.readFileSync(file, 'utf8')}\n`);
  process.exit(0);
}
