// In-process sharp doing the origin's work (decode, rotate, 512×512 fit, encode) on the same files,
// at a given concurrency: the bar the service is measured against. Prints JSON.
//   node bench/sharp-inprocess.js <format> <concurrency> <count> <file>...
import sharp from 'sharp';
import { jpegOptions } from '../origin/src/transform.js';
import { percentile } from './lib.js';

sharp.cache(false);
const [format, concurrencyText, countText, ...files] = process.argv.slice(2);
const concurrency = Number(concurrencyText);
const count = Number(countText);

/** @param {string} file */
function work(file) {
  const image = sharp(file, { limitInputPixels: 50_000_000, sequentialRead: true }).rotate().resize({ width: 512, height: 512, fit: 'inside', withoutEnlargement: true });
  const encoded = format === 'webp' ? image.webp({ quality: 80, effort: 4 }) : image.flatten({ background: '#ffffff' }).jpeg(jpegOptions(80, process.env.JPEG_TRELLIS === 'true'));
  return encoded.toBuffer();
}

const latencies = [];
let next = 0;
let bytes = 0;
const started = performance.now();
await Promise.all(Array.from({ length: concurrency }, async () => {
  while (next < count) {
    const file = files[next++ % files.length];
    const sent = performance.now();
    const out = await work(file);
    bytes += out.length;
    latencies.push(performance.now() - sent);
  }
}));
const seconds = (performance.now() - started) / 1000;
process.stdout.write(JSON.stringify({ requests: count, seconds, rps: count / seconds, p50_ms: percentile(latencies, 0.5), p99_ms: percentile(latencies, 0.99), bytes }));
