// What a variant costs and looks like against its source: the mean SSIM the quality tables of bench/peers,
// bench/effort and bench/kernel report, and the one-thread measurement of the origin's transform that
// bench/effort and bench/kernel make with different encoder options.
import sharp from 'sharp';
import ssimModule from 'ssim.js';
import { plan, probe, transform } from '../origin/src/transform.js';
import { photo } from '../test/support/images.js';
import { spread } from './lib.js';

const { ssim } = /** @type {any} */ (ssimModule);

/** The six real photographs the quality benchmarks use (1920×1080). */
export const PHOTOS = ['Path', 'Autumn', 'ColdRipple', 'BytheWater', 'Kite', 'FallenLeaf'];
export const photoFiles = () => PHOTOS.map((name) => photo(name, '1920x1080'));

/** The origin's transform options on one libvips thread, with the defaults the benchmarks vary from. */
export const ONE_THREAD = { maxPixels: 50_000_000, timeoutS: 600, threads: 1, jpegQuality: 80, jpegTrellis: false, webpQuality: 80, webpEffort: 4, avifQuality: 50, avifEffort: 4 };

/**
 * Mean SSIM of encoded outputs against each source resized to the output's size, unencoded. The reference is
 * resized with lanczos3 from the fully decoded pixels (no shrink-on-load), so it is no server's pipeline:
 * resized straight from the file it was our origin's own decode and reduce, and only another server's
 * resampling (or another kernel) counted against it. @param {string[]} files @param {Buffer[]} outputs
 */
export async function meanSsim(files, outputs) {
  let sum = 0;
  for (const [i, file] of files.entries()) {
    const decoded = await sharp(outputs[i]).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
    const { width, height } = decoded.info;
    const full = await sharp(file).rotate().raw().toBuffer({ resolveWithObject: true });
    const reference = await sharp(full.data, { raw: full.info }).resize(width, height, { fit: 'fill', kernel: 'lanczos3' }).ensureAlpha().raw().toBuffer();
    sum += ssim({ data: new Uint8ClampedArray(reference), width, height }, { data: new Uint8ClampedArray(decoded.data), width, height }).mssim;
  }
  return sum / files.length;
}

/**
 * The origin's transform (decode → rotate → 512×512 fit → encode) of every file, `repeats` times: CPU ms per
 * variant (process CPU time over a run ÷ files; min / median / max), mean KB and mean SSIM of the last run.
 * @param {string[]} files @param {'jpeg' | 'webp' | 'avif'} format @param {Parameters<typeof transform>[2]} options @param {number} repeats
 */
export async function measureTransforms(files, format, options, repeats) {
  const plans = await Promise.all(files.map(async (file) => plan(await probe(file, { maxPixels: options.maxPixels, maxFrames: 300 }), { width: 512, height: 512, mode: 'fit', format, accept: '' }, false)));
  /** @type {number[]} */
  const cpuMs = [];
  /** @type {Buffer[]} */
  let outputs = [];
  for (let run = 0; run < repeats; run += 1) {
    const before = process.cpuUsage();
    outputs = [];
    for (const [i, file] of files.entries()) outputs.push((await transform(file, plans[i], options)).data);
    const used = process.cpuUsage(before);
    cpuMs.push((used.user + used.system) / 1000 / files.length);
  }
  const kb = outputs.reduce((sum, output) => sum + output.length, 0) / files.length / 1024;
  return { cpuMs: spread(cpuMs), kb, ssim: await meanSsim(files, outputs) };
}
