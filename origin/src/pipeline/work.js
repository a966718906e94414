// What the steps of the pipeline hand each other, and the failures of a sharp pipeline in the service's words.
import { corrupt, isMissing, missingSource, transformTimeout } from './source.js';

/**
 * @typedef {import('./plan.js').Plan} Plan
 * @typedef {{ jpegQuality: number, jpegProgressive: boolean, jpegTrellis: boolean, webpQuality: number, webpEffort: number,
 *   avifQuality: number, avifEffort: number, jpegTable?: number }} EncodeOptions
 * @typedef {{ data: Uint8Array, width: number, height: number, channels: 3 | 4, decodedBy: DecodedBy,
 *   resized?: Map<string, ResizedPixels> }} KeptPixels
 *   a source's pixels kept after one decode (kept-pixels.js): upright, sRGB, 8 bits a channel; decodedBy: what
 *   decoded them; resized: variants' pixels resized from them, by size, for the other formats of that size
 *   (shared-resize.js)
 * @typedef {{ data: Uint8Array, width: number, height: number, channels: 3 }} ResizedPixels
 * @typedef {{ maxPixels: number, timeoutS: number, threads?: number, kernel?: keyof import('sharp').KernelEnum,
 *   codecs?: import('../codecs.js').SystemCodecs, kept?: KeptPixels | null } & EncodeOptions} TransformOptions
 *   threads: libvips' thread count for this image; kernel: sharp's lanczos3 unless given (bench/kernel compares
 *   the others); codecs: the system's libjpeg-turbo and libwebp (codecs.js); kept: the source's kept pixels, which
 *   cover this variant (the decode is skipped)
 * @typedef {'kept' | 'libjpeg-turbo' | 'libavcodec' | 'libheif' | 'sharp'} DecodedBy
 * @typedef {'libwebp' | 'libjpeg-turbo' | 'sharp'} EncodedBy
 * @typedef {{ file: string, plan: Plan, options: TransformOptions, image: import('sharp').Sharp | null,
 *   decodedBy: DecodedBy, orientation: number | 'auto', data: Buffer | null, encodedBy: EncodedBy,
 *   sharedResize: boolean, release: Array<() => void> }} Work
 *   image: the sharp pipeline the steps add to; orientation: what the orient step still has to apply ('auto':
 *   sharp reads it from the file); sharedResize: the image is the resized pixels of another format of this size
 *   (shared-resize.js), the resize step has nothing to do; release: run once the transform is done (pixel
 *   buffers back to the pool)
 */

/**
 * A sharp pipeline's output, its failures in the service's words.
 * @template T @param {Promise<T>} output @returns {Promise<T>}
 */
export async function sharpOutput(output) {
  try {
    return await output;
  } catch (err) {
    const message = String(/** @type {Error} */ (err).message);
    if (/timeout/i.test(message)) throw transformTimeout();
    if (isMissing(err)) throw missingSource();
    throw corrupt();
  }
}

/** The work's sharp pipeline, there once decode has run. @param {Work} work */
export function imageOf(work) {
  if (!work.image) throw new Error('pipeline: no image before decode');
  return work.image;
}
