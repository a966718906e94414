// bench/kernel: what the resize kernel costs and gives, on the real photographs, with the origin's own
// transform (decode → rotate → 512×512 fit → encode, one libvips thread): CPU ms per variant, mean KB and
// mean SSIM against a reference no server's pipeline made (bench/quality.js), at two JPEG qualities and WebP
// q80, so a cheaper kernel can be compared with lanczos3 (sharp's default) at equal bytes.
//   node bench/kernel.js [--quick]
import '../lib/src/node-version.js';
import fs from 'node:fs';
import sharp from 'sharp';
import { machine, writeReport } from './lib.js';
import { ONE_THREAD, measureTransforms, photoFiles } from './quality.js';

const QUICK = process.argv.includes('--quick');
const KERNELS = /** @type {const} */ (['lanczos3', 'lanczos2', 'cubic', 'mitchell', 'linear']);
const CASES = /** @type {const} */ ([
  ['jpeg', 80],
  ['jpeg', 76],
  ['webp', 80],
]);
const REPEATS = QUICK ? 1 : 5;

/** The origin's transform with `kernel`. @param {'jpeg' | 'webp'} format @param {number} quality @param {typeof KERNELS[number]} kernel @param {string[]} files */
async function measure(format, quality, kernel, files) {
  return {
    format,
    quality,
    kernel,
    ...(await measureTransforms(
      files,
      format,
      { ...ONE_THREAD, jpegQuality: quality, webpQuality: quality, kernel },
      REPEATS,
    )),
  };
}

export async function benchKernel() {
  sharp.cache(false);
  sharp.concurrency(1);
  const files = photoFiles();
  // a first pass, not counted: the first transforms load libvips' code and warm the JIT (seen: +30 %)
  await measure('jpeg', 80, 'lanczos3', files);
  const rows = [];
  for (const [format, quality] of CASES) {
    for (const kernel of KERNELS) {
      const result = await measure(format, quality, kernel, files);
      process.stderr.write(
        `${format} q${quality} ${kernel}: ${result.cpuMs.median.toFixed(1)} CPU ms, ${result.kb.toFixed(2)} KB, SSIM ${result.ssim.toFixed(4)}\n`,
      );
      rows.push(result);
    }
  }
  return {
    rows,
    sections: [
      {
        heading:
          'Resize kernel: CPU ms per variant, bytes and SSIM (512×512 fit of six 2560×1600 photographs; one libvips thread)',
        text: `CPU ms: process CPU time over the six transforms ÷ 6, min / median / max of ${REPEATS} runs. SSIM against the photograph decoded whole and resized with lanczos3 (bench/quality.js).`,
        table: {
          columns: ['format', 'quality', 'kernel', 'CPU ms per variant', 'mean KB', 'mean SSIM'],
          rows: rows.map((row) => [
            row.format,
            row.quality,
            row.kernel,
            `${row.cpuMs.min.toFixed(1)} / ${row.cpuMs.median.toFixed(1)} / ${row.cpuMs.max.toFixed(1)}`,
            row.kb.toFixed(2),
            row.ssim.toFixed(4),
          ]),
        },
      },
    ],
  };
}

if (import.meta.main) {
  const result = await benchKernel();
  const file = writeReport('kernel', {
    title: 'bench/kernel',
    command: `node bench/kernel.js${QUICK ? ' --quick' : ''}`,
    machine: await machine(),
    sections: result.sections,
    data: result,
  });
  process.stdout.write(`${fs.readFileSync(file, 'utf8')}\n`);
}
