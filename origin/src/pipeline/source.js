// The pipeline's first step, before any decode: what the original is (its header read, the pixel and frame
// limits enforced), whether it is whole (uploads), and the pipeline's errors about the source.
import fs from 'node:fs/promises';
import sharp from 'sharp';
import { GoneError, HttpError } from '@stack/lib/src/errors.js';
import { isSrgbProfile } from '../icc.js';
import { heicDecoder } from '../heic/libheif.js';

// Formats we decode. SVG is refused (it can reference external resources and script); so are PDFs etc.
const INPUT_FORMATS = new Set(['jpeg', 'png', 'webp', 'gif', 'heif', 'tiff']);

/**
 * @typedef {{ format: string, width: number, height: number, frames: number, orientation: number,
 *   hasAlpha: boolean, isPalette: boolean, isAvif: boolean, isHeic: boolean, srgbProfile: boolean, plainJpeg: boolean,
 *   overBudget?: boolean }} SourceInfo overBudget: an animation past MAX_FRAMES or whose frames cost more than
 *   MAX_INPUT_PIXELS (animationCost)
 */

/**
 * What a frame costs beyond its pixels, in pixels: libvips and the encoders spend about 0.19 ms on each frame
 * whatever its size (3,000 frames of 16 × 16 took 570 ms to WebP), what about 1,000 pixels of a frame cost.
 */
export const FRAME_OVERHEAD_PIXELS = 1000;

/**
 * An animation's cost in pixels: every frame's pixels and its overhead. A frame count alone is not a cost:
 * 600 frames of 160 × 90 (8.6 MP, 2 s to WebP at its size) cost less than 30 of 1920 × 1080.
 * @param {number} frames @param {number} framePixels
 */
export const animationCost = (frames, framePixels) => (frames > 1 ? frames * frameCost(framePixels) : framePixels);

/** One frame of an animation, in pixels: its own and the overhead. @param {number} framePixels */
export const frameCost = (framePixels) => framePixels + FRAME_OVERHEAD_PIXELS;

/**
 * Reads the header only (no decode) and enforces the pixel and frame limits before any work. A HEIC
 * (`limits.heic`: HEVC decoding allowed, HEIC_DECODE) is read by the system's libheif, whose images come
 * turned as the file says.
 * `limits.animations`: an animation past the frame or pixel budget is read (overBudget) rather than refused,
 * as long as one frame is within the pixel budget: the plan decides what of it is made.
 * @param {string} file @param {{ maxPixels: number, maxFrames: number, heic?: boolean, animations?: boolean }} limits
 * @returns {Promise<SourceInfo>}
 */
export async function probe(file, limits) {
  let meta;
  try {
    meta = await sharp(file, { limitInputPixels: false }).metadata();
  } catch (err) {
    if (isMissing(err)) throw missingSource();
    throw new HttpError(400, 'invalid_image', { reason: 'not a decodable image' });
  }
  if (!meta.format || !INPUT_FORMATS.has(meta.format)) {
    throw new HttpError(400, 'unsupported_format', { format: meta.format || 'unknown' });
  }
  // HEIF holding HEVC (HEIC photographs): the libvips sharp ships decodes AV1 (AVIF) only
  if (meta.format === 'heif' && meta.compression !== 'av1') return probeHeic(file, limits);
  const frames = meta.pages || 1;
  const frameHeight = meta.pageHeight || meta.height || 0;
  const width = meta.width || 0;
  const overBudget = frames > limits.maxFrames || animationCost(frames, width * frameHeight) > limits.maxPixels;
  const readable = limits.animations && frames > 1 && width * frameHeight <= limits.maxPixels;
  if (frames > limits.maxFrames && !readable)
    throw new HttpError(400, 'too_many_frames', { frames, limit: limits.maxFrames });
  if (animationCost(frames, width * frameHeight) > limits.maxPixels && !readable) {
    throw new HttpError(400, 'image_too_large', { width, height: frameHeight, frames, limit_pixels: limits.maxPixels });
  }
  if (meta.format === 'gif' && !(await endsWithGifTrailer(file))) throw corrupt();
  const swap = (meta.orientation || 1) >= 5;
  // converting through an sRGB profile to sRGB changes nothing but costs a quarter of a photograph's
  // transform: skipped (any other profile, Display P3, Adobe RGB, CMYK, is applied)
  const srgbProfile = isSrgbProfile(meta.icc);
  return {
    format: meta.format,
    width: swap ? frameHeight : width,
    height: swap ? width : frameHeight,
    frames,
    orientation: meta.orientation || 1,
    hasAlpha: Boolean(meta.hasAlpha),
    isPalette: Boolean(meta.isPalette),
    isAvif: meta.format === 'heif' && meta.compression === 'av1',
    isHeic: false,
    srgbProfile,
    // 8-bit YCbCr or RGB with no profile to apply: what the system's decoder may take instead of sharp
    plainJpeg: meta.format === 'jpeg' && meta.channels === 3 && meta.space === 'srgb' && (!meta.icc || srgbProfile),
    overBudget,
  };
}

/** @param {string} file @param {{ maxPixels: number, heic?: boolean }} limits @returns {Promise<SourceInfo>} */
async function probeHeic(file, limits) {
  const decoder = limits.heic ? heicDecoder() : null;
  if (!decoder)
    throw new HttpError(400, 'unsupported_format', {
      format: 'heic',
      reason: limits.heic
        ? 'no HEVC decoder on this machine (libheif1, libde265-0)'
        : 'HEVC decoding is off (HEIC_DECODE)',
    });
  const info = decoder.info(await fs.readFile(file));
  if (info.width * info.height > limits.maxPixels) {
    throw new HttpError(400, 'image_too_large', {
      width: info.width,
      height: info.height,
      frames: 1,
      limit_pixels: limits.maxPixels,
    });
  }
  return {
    format: 'heif',
    width: info.width,
    height: info.height,
    frames: 1,
    orientation: 1,
    hasAlpha: info.hasAlpha,
    isPalette: false,
    isAvif: false,
    isHeic: true,
    srgbProfile: false,
    plainJpeg: false,
  };
}

/** A transform that took longer than TRANSFORM_TIMEOUT_S. */
export const transformTimeout = () => new HttpError(503, 'transform_timeout', {}, { 'Retry-After': '5' });
export const corrupt = () => new HttpError(400, 'invalid_image', { reason: 'corrupt or truncated image' });

/** sharp's words for a file that is not there (a cached original deleted by hand): not the image's fault. @param {unknown} err */
export const isMissing = (err) => /^Input file is missing/.test(String(/** @type {Error} */ (err)?.message));

/** The error for a source file that is gone; the caller fetches the original again. */
export const missingSource = () => new GoneError('source file missing');

/**
 * libvips decodes a cut GIF without a word (the frames found so far): a complete one ends with the trailer
 * byte 0x3B, possibly followed by zero padding. @param {string} file
 */
async function endsWithGifTrailer(file) {
  const handle = await fs.open(file, 'r');
  try {
    const { size } = await handle.stat();
    const tail = Buffer.alloc(Math.min(size, 64));
    await handle.read(tail, 0, tail.length, size - tail.length);
    let end = tail.length - 1;
    while (end >= 0 && tail[end] === 0) end -= 1;
    return end >= 0 && tail[end] === 0x3b;
  } finally {
    await handle.close();
  }
}

/**
 * Decodes every pixel of every frame (at a reduced size, so JPEG decodes at 1/8 scale) and fails on a
 * truncated or corrupt stream. For uploads: what is stored under a key must be a whole image.
 * @param {string} file @param {SourceInfo} info @param {number} [maxPixels] an animation past its budget is
 *   verified in the frames a variant of it makes (MAX_INPUT_PIXELS)
 */
export async function verify(file, info, maxPixels = Infinity) {
  if (info.isHeic) {
    await /** @type {import('../heic/libheif.js').HeicDecoder} */ (heicDecoder()).decode(
      await fs.readFile(file),
      Infinity,
    );
    return;
  }
  try {
    // an animation past the budget: its first frames, as many as a variant of it would make
    const firstFrames = Math.max(1, Math.floor(maxPixels / frameCost(info.width * info.height)));
    const pages = info.frames === 1 ? 1 : info.overBudget ? Math.min(info.frames, firstFrames) : -1;
    await sharp(file, { failOn: 'truncated', pages, limitInputPixels: false, sequentialRead: true })
      .resize(64, 64, { fit: 'inside' })
      .raw()
      .toBuffer();
  } catch {
    throw corrupt();
  }
}
