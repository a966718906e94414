// What a variant costs and looks like against its source: the mean SSIM the quality tables of bench/peers,
// bench/effort and bench/kernel report, and the one-thread measurement of the origin's transform that
// bench/effort and bench/kernel make with different encoder options. That transform runs in sharp alone (no
// system codecs: libwebp's simple API has one effort), so the settings it compares share one encoder.
import sharp from 'sharp';
import { plan, probe, transform } from '../origin/src/pipeline/index.js';
import { photo } from '../test/support/images.js';
import { ssimToSource } from '../test/support/ssim.js';
import { spread } from './lib.js';

/** The six real photographs the quality benchmarks use: 2560×1600, although Debian names the files 1920x1080. */
export const PHOTOS = ['Path', 'Autumn', 'ColdRipple', 'BytheWater', 'Kite', 'FallenLeaf'];
export const photoFiles = () => PHOTOS.map((name) => photo(name, '1920x1080'));

/** The origin's transform options on one libvips thread, with the defaults the benchmarks vary from. */
export const ONE_THREAD = {
  maxPixels: 50_000_000,
  timeoutS: 600,
  threads: 1,
  jpegQuality: 80,
  jpegProgressive: false,
  jpegTrellis: false,
  webpQuality: 80,
  webpEffort: 4,
  avifQuality: 68,
  avifEffort: 4,
};

/**
 * Mean SSIM of encoded outputs against each source resized to the output's size, unencoded. The reference is
 * resized with lanczos3 from the fully decoded pixels (no shrink-on-load), so it is no server's pipeline:
 * resized straight from the file it was our origin's own decode and reduce, and only another server's
 * resampling (or another kernel) counted against it. @param {string[]} files @param {Buffer[]} outputs
 */
export async function meanSsim(files, outputs) {
  let sum = 0;
  for (const [i, file] of files.entries()) sum += await ssimToSource(file, outputs[i], 'fill');
  return sum / files.length;
}

/**
 * @param {string[]} files @param {'jpeg' | 'webp' | 'avif'} format @param {number} maxPixels
 * @param {Omit<import('../origin/src/options.js').Want, 'format'>} [want]
 */
async function plansOf(files, format, maxPixels, want = FIT_512) {
  return Promise.all(
    files.map(async (file) => plan(await probe(file, { maxPixels, maxFrames: 300 }), { ...want, format }, false)),
  );
}

/** bench/origin's variant, the one the benchmarks compare: 512 × 512, fit. */
const FIT_512 = /** @type {const} */ ({ width: 512, height: 512, mode: 'fit', accept: '' });

/**
 * One pass of the origin's transform over every file: CPU ms per variant (process CPU time ÷ files) and the outputs.
 * @param {string[]} files @param {Awaited<ReturnType<typeof plansOf>>} plans @param {Parameters<typeof transform>[2]} options
 */
async function pass(files, plans, options) {
  const before = process.cpuUsage();
  /** @type {Buffer[]} */
  const outputs = [];
  for (const [i, file] of files.entries()) outputs.push((await transform(file, plans[i], options)).data);
  const used = process.cpuUsage(before);
  return { cpuMs: (used.user + used.system) / 1000 / files.length, outputs };
}

/** @param {string[]} files @param {Buffer[]} outputs */
async function sizeAndQuality(files, outputs) {
  return {
    kb: outputs.reduce((sum, output) => sum + output.length, 0) / files.length / 1024,
    ssim: await meanSsim(files, outputs),
  };
}

/**
 * The origin's transform (decode → rotate → 512×512 fit → encode) of every file, `repeats` times: CPU ms per
 * variant (process CPU time over a run ÷ files; min / median / max), mean KB and mean SSIM of the last run.
 * @param {string[]} files @param {'jpeg' | 'webp' | 'avif'} format @param {Parameters<typeof transform>[2]} options @param {number} repeats
 */
export async function measureTransforms(files, format, options, repeats) {
  const plans = await plansOf(files, format, options.maxPixels);
  /** @type {number[]} */
  const cpuMs = [];
  /** @type {Buffer[]} */
  let outputs = [];
  for (let run = 0; run < repeats; run += 1) {
    const result = await pass(files, plans, options);
    cpuMs.push(result.cpuMs);
    outputs = result.outputs;
  }
  return { cpuMs: spread(cpuMs), ...(await sizeAndQuality(files, outputs)) };
}

/**
 * Several encoder settings compared on CPU where a few per cent matter: each round runs every setting once in
 * turn, so a slow minute of the machine (this VM's speed moves by a fifth within minutes) weighs on all of them
 * alike. Per setting: CPU ms per variant and its ratio to the first setting's in the same round (min / median /
 * max over the rounds), mean KB and SSIM.
 * @param {string[]} files @param {'jpeg' | 'webp' | 'avif'} format @param {Parameters<typeof transform>[2][]} settings @param {number} rounds
 * @param {Omit<import('../origin/src/options.js').Want, 'format'>} [want] the variant (bench/origin's 512 × 512 fit unless given)
 */
export async function compareInTurn(files, format, settings, rounds, want = FIT_512) {
  const plans = await plansOf(files, format, settings[0].maxPixels, want);
  const outputs = [];
  for (const options of settings) outputs.push((await pass(files, plans, options)).outputs); // also a warm-up
  /** @type {number[][]} */
  const cpu = settings.map(() => []);
  for (let round = 0; round < rounds; round += 1) {
    for (const [i, options] of settings.entries()) cpu[i].push((await pass(files, plans, options)).cpuMs);
  }
  return Promise.all(
    settings.map(async (_, i) => ({
      cpuMs: spread(cpu[i]),
      ratio: spread(cpu[i].map((ms, round) => ms / cpu[0][round])),
      ...(await sizeAndQuality(files, outputs[i])),
    })),
  );
}
