// The origin's image pipeline: probe the source (source.js), plan the variant (plan.js), then run the
// STEPS in order over one piece of work (work.js): decode, orient, resize, encode. Decode and encode each
// have implementations tried in order (the system's libjpeg-turbo, libheif and libwebp, and sharp).
import sharp from 'sharp';
import { decode } from './decode.js';
import { encode } from './encode.js';
import { orient } from './orient.js';
import { resize } from './resize.js';

export { contentTypeOf, originalAnswers, outputPixels, plan, sourceFormat } from './plan.js';
export { missingSource, probe, transformTimeout, verify } from './source.js';
export { jpegShrinkOnLoad, shrinkOf } from './decode.js';

/**
 * @typedef {import('./plan.js').Plan} Plan
 * @typedef {import('./plan.js').OutputFormat} OutputFormat
 * @typedef {import('./source.js').SourceInfo} SourceInfo
 * @typedef {import('./work.js').TransformOptions} TransformOptions
 * @typedef {{ name: string, run: (work: import('./work.js').Work) => Promise<void> }} Step
 * @typedef {{ data: Buffer, codecs: { decode: import('./work.js').DecodedBy, encode: 'libwebp' | 'sharp' } }} TransformOutput
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
    release: [],
  };
  try {
    for (const step of STEPS) await step.run(work);
    return { data: /** @type {Buffer} */ (work.data), codecs: { decode: work.decodedBy, encode: work.encodedBy } };
  } finally {
    work.release.forEach((release) => release());
  }
}
