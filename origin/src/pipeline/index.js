// The origin's image pipeline: probe the source (source.js), plan the variant (plan.js), then run the
// STEPS in order over one piece of work (work.js): decode, orient, resize, encode. Decode and encode each
// have implementations tried in order (the system's libjpeg-turbo, libheif and libwebp, and sharp).
import sharp from 'sharp';
import { decode, shrinkOf } from './decode.js';
import { encode } from './encode.js';
import { orient } from './orient.js';
import { resize } from './resize.js';
import { plan } from './plan.js';
import { imageOf, sharpOutput } from './work.js';

export { contentTypeOf, originalAnswers, outputPixels, plan, sourceFormat } from './plan.js';
export { missingSource, probe, transformTimeout, verify } from './source.js';
export { jpegShrinkOnLoad } from './decode.js';
export { countAgain, keptBytes, withoutResized } from './shared-resize.js';
export { shrinkOf };

// libvips' own operation cache only grows memory (up to 50 MB and 20 open files by sharp's default) in every
// process that transforms: the origin's and each transform worker's (workers/pool.js). Every variant is cached
// on disk and by varnish, and a source's decode is kept, where it pays, as kept pixels (kept-pixels.js).
sharp.cache(false);

/**
 * @typedef {import('./plan.js').Plan} Plan
 * @typedef {import('./plan.js').OutputFormat} OutputFormat
 * @typedef {import('./source.js').SourceInfo} SourceInfo
 * @typedef {import('./work.js').TransformOptions} TransformOptions
 * @typedef {{ name: string, run: (work: import('./work.js').Work) => Promise<void> }} Step
 * @typedef {{ data: Buffer, codecs: { decode: import('./work.js').DecodedBy, encode: import('./work.js').EncodedBy },
 *   sharedResize?: true }} TransformOutput sharedResize: encoded from the resized pixels of another format of its
 *   size (shared-resize.js)
 */

/** @type {Step[]} */
export const STEPS = [
  { name: 'decode', run: decode },
  { name: 'orient', run: orient },
  { name: 'resize', run: resize },
  { name: 'encode', run: encode },
];

/**
 * libvips threads for the next image. A lone transform gets every core (an AVIF encode: 335 ms on two
 * threads, 580 ms on one). Once the transforms running fill the cores, more threads per image only add
 * hand-offs between them: one each made 5% more JPEG variants per second here (bench/origin), the same WebP.
 * @param {number} running transforms running, the next one included @param {number} cores
 */
export function threadsPerImage(running, cores) {
  return Math.max(1, Math.floor(cores / Math.max(1, running)));
}

/**
 * The variant of `file` by plan `p`: every step in order. `options.threads`, when given, is libvips' thread
 * count for this image (a process-wide setting, read when the pipeline starts).
 * @param {string} file @param {Plan} p @param {TransformOptions} options @returns {Promise<TransformOutput>}
 */
export async function transform(file, p, options) {
  return withWork(file, p, options, async (work) => {
    for (const step of STEPS) await step.run(work);
    const codecs = { decode: work.decodedBy, encode: work.encodedBy };
    return { data: /** @type {Buffer} */ (work.data), codecs, ...(work.sharedResize ? { sharedResize: true } : {}) };
  });
}

/**
 * `use(work)` on a new piece of work, its buffers given back after. @template T @param {string} file
 * @param {Plan} p @param {TransformOptions} options @param {(work: import('./work.js').Work) => Promise<T>} use
 */
async function withWork(file, p, options, use) {
  if (options.threads) sharp.concurrency(options.threads);
  /** @type {import('./work.js').Work} */
  const work = {
    file,
    plan: p,
    options,
    image: null,
    decodedBy: 'sharp',
    orientation: 1,
    data: null,
    encodedBy: 'sharp',
    sharedResize: false,
    release: [],
  };
  try {
    return await use(work);
  } finally {
    work.release.forEach((release) => release());
  }
}

/** Formats whose still images are kept after one decode. */
const KEPT_FORMATS = new Set(['jpeg', 'png', 'webp', 'tiff', 'heif']);

/**
 * The plan that makes a source's kept pixels (kept-pixels.js): the source upright, shrunk by the largest power
 * of two that leaves it at least `width` wide (a JPEG's DCT scale, a HEIC's plane shrink: no resampling that
 * costs sharpness; measured on a 2560 × 1600 photograph, every variant of the frontends' set from its
 * full-size pixels had at least the SSIM it had from the file, where pixels resized to 1536 lost up to 0.0019);
 * null for what is not kept (an animation). @param {SourceInfo} source @param {number} width @returns {Plan | null}
 */
export function keepPlan(source, width) {
  if (source.frames > 1 || !KEPT_FORMATS.has(source.format)) return null;
  let factor = 1;
  while (factor < 8 && source.width / (factor * 2) >= width) factor *= 2;
  /** @type {import('../options.js').Want} */
  const want = { width: Math.round(source.width / factor), height: null, mode: 'fit', format: 'png', accept: '' };
  return plan(source, want, false);
}

/**
 * Whether kept pixels hold all a variant of plan `p` needs: at least its size (a variant is never made
 * from fewer pixels than it has). @param {{ width: number, height: number }} kept @param {SourceInfo} source
 * @param {Plan} p
 */
export function keptCovers(kept, source, p) {
  if (p.animated) return false;
  const shrink = shrinkOf(source.width, source.height, p);
  return kept.width + 0.5 >= source.width / shrink && kept.height + 0.5 >= source.height / shrink;
}

/**
 * The pixels of `file` by plan `p`, raw (decode, orient, resize: no encode), sRGB, 8 bits a channel: what
 * kept-pixels.js keeps. @param {string} file @param {Plan} p @param {TransformOptions} options
 * @returns {Promise<import('./work.js').KeptPixels>}
 */
export function transformToPixels(file, p, options) {
  return withWork(file, p, { ...options, kept: null }, async (work) => {
    for (const step of STEPS.filter((one) => one.name !== 'encode')) await step.run(work);
    const { data, info } = await sharpOutput(
      imageOf(work).toColourspace('srgb').raw({ depth: 'uchar' }).toBuffer({ resolveWithObject: true }),
    );
    const channels = /** @type {3 | 4} */ (info.channels);
    return { data, width: info.width, height: info.height, channels, decodedBy: work.decodedBy };
  });
}
