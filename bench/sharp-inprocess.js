// In-process sharp doing the origin's work on the same files, at a given concurrency, with the origin's
// own transform (decode → rotate → 512×512 fit → encode, as planned from each file's header, read once as
// the origin does, with the system codecs it loads) and nothing else (no HTTP, no store, no queue): the bar
// the service is measured against. Prints JSON.
//   node bench/sharp-inprocess.js <format> <concurrency> <count> <file>...
import sharp from 'sharp';
import { loadSystemCodecs } from '../origin/src/codecs.js';
import { plan, probe, transform } from '../origin/src/pipeline/index.js';
import { percentile } from './lib.js';

sharp.cache(false);
const [format, concurrencyText, countText, ...files] = process.argv.slice(2);
const concurrency = Number(concurrencyText);
const count = Number(countText);
// the origin's system codecs too (SYSTEM_CODECS, as the service reads it: auto unless set)
const codecs = loadSystemCodecs(/** @type {'auto' | 'on' | 'off'} */ (process.env.SYSTEM_CODECS || 'auto'));
const OPTIONS = {
  maxPixels: 50_000_000,
  timeoutS: 30,
  jpegQuality: 80,
  jpegProgressive: false,
  jpegTrellis: process.env.JPEG_TRELLIS === 'true',
  webpQuality: 80,
  webpEffort: 4,
  avifQuality: 50,
  avifEffort: 4,
  codecs,
};

const plans = new Map();
for (const file of files) {
  const source = await probe(file, { maxPixels: OPTIONS.maxPixels, maxFrames: 300 });
  plans.set(file, plan(source, { width: 512, height: 512, mode: 'fit', format, accept: '' }, false));
}

/** @param {string} file */
async function work(file) {
  return (await transform(file, plans.get(file), OPTIONS)).data;
}

const latencies = [];
let next = 0;
let bytes = 0;
const started = performance.now();
await Promise.all(
  Array.from({ length: concurrency }, async () => {
    while (next < count) {
      const file = files[next++ % files.length];
      const sent = performance.now();
      const out = await work(file);
      bytes += out.length;
      latencies.push(performance.now() - sent);
    }
  }),
);
const seconds = (performance.now() - started) / 1000;
process.stdout.write(
  JSON.stringify({
    requests: count,
    seconds,
    rps: count / seconds,
    p50_ms: percentile(latencies, 0.5),
    p99_ms: percentile(latencies, 0.99),
    bytes,
  }),
);
