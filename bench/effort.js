// bench/effort: what each encoder effort costs and gives, on the real photographs, with the origin's own
// transform (decode → rotate → 512×512 fit → encode): CPU ms per variant (one libvips thread, process CPU
// time over the encodes ÷ variants), mean KB and mean SSIM against the unencoded resize. The defaults of
// AVIF_EFFORT and WEBP_EFFORT are set from it (README, Encoding).
//   node bench/effort.js [--quick]
import fs from 'node:fs';
import sharp from 'sharp';
import { machine, spread, writeReport } from './lib.js';
import { ONE_THREAD, measureTransforms, photoFiles } from './quality.js';

const QUICK = process.argv.includes('--quick');
const EFFORTS = { webp: QUICK ? [0, 4, 6] : [0, 1, 2, 3, 4, 5, 6], avif: QUICK ? [0, 4, 9] : [0, 1, 2, 3, 4, 5, 6, 7, 8, 9] };
const REPEATS = QUICK ? 1 : 3;

/** @param {'webp' | 'avif'} format @param {number} effort @param {string[]} files */
async function measure(format, effort, files) {
  return { format, effort, ...await measureTransforms(files, format, { ...ONE_THREAD, [`${format}Effort`]: effort }, REPEATS) };
}

/** What every effort shares: decode, rotate and resize to raw pixels. @param {string[]} files */
async function baseline(files) {
  /** @type {number[]} */
  const cpuMs = [];
  for (let run = 0; run < REPEATS; run += 1) {
    const before = process.cpuUsage();
    for (const file of files) await sharp(file, { sequentialRead: true }).rotate().resize(512, 512, { fit: 'inside' }).raw().toBuffer();
    const used = process.cpuUsage(before);
    cpuMs.push((used.user + used.system) / 1000 / files.length);
  }
  return spread(cpuMs);
}

export async function benchEffort() {
  sharp.cache(false);
  sharp.concurrency(1);
  const files = photoFiles();
  const shared = await baseline(files);
  process.stderr.write(`decode + resize: ${shared.median.toFixed(1)} CPU ms\n`);
  const rows = [];
  for (const format of /** @type {const} */ (['webp', 'avif'])) {
    for (const effort of EFFORTS[format]) {
      const result = await measure(format, effort, files);
      process.stderr.write(`${format} effort ${effort}: ${result.cpuMs.median.toFixed(1)} CPU ms, ${result.kb.toFixed(1)} KB, SSIM ${result.ssim.toFixed(4)}\n`);
      rows.push(result);
    }
  }
  return {
    rows,
    shared,
    sections: [{
      heading: 'Encoder effort: CPU ms per variant, bytes and SSIM (512×512 fit of six 1920×1080 photographs; WebP q80, AVIF q50; one libvips thread)',
      text: `CPU ms: process CPU time over the six transforms ÷ 6, min / median / max of ${REPEATS} runs; the encode alone is that less what every effort shares, decoding and resizing to raw pixels (${shared.min.toFixed(1)} / ${shared.median.toFixed(1)} / ${shared.max.toFixed(1)} ms). SSIM against the photograph decoded whole and resized to the variant's size, unencoded (bench/quality.js).`,
      table: {
        columns: ['format', 'effort', 'CPU ms per variant', 'of which the encode (median)', 'mean KB', 'mean SSIM'],
        rows: rows.map((row) => [row.format, row.effort, `${row.cpuMs.min.toFixed(1)} / ${row.cpuMs.median.toFixed(1)} / ${row.cpuMs.max.toFixed(1)}`, Math.max(0, row.cpuMs.median - shared.median).toFixed(1), row.kb.toFixed(1), row.ssim.toFixed(4)]),
      },
    }],
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const result = await benchEffort();
  const file = writeReport('effort', { title: 'bench/effort', command: `node bench/effort.js${QUICK ? ' --quick' : ''}`, machine: await machine(), sections: result.sections, data: result });
  process.stdout.write(`${fs.readFileSync(file, 'utf8')}\n`);
}
