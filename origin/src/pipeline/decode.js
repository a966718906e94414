// The decode step: the first decoder of DECODERS that takes the original. Pixels kept from an earlier
// variant of the same source (kept-pixels.js) need no decode at all; the system's libjpeg-turbo
// (codecs.js) decodes a plain JPEG at the DCT scale sharp would pick; a HEIC goes to libavcodec at a reduced
// size (heic/planes.js) or, where that does not take it, to libheif (heic/libheif.js); sharp decodes
// anything else from the file. Each leaves a sharp pipeline in `work.image` and says what orientation is
// still to apply.
import fs from 'node:fs/promises';
import sharp from 'sharp';
import { HttpError, isGone } from '@stack/lib/src/errors.js';
import { heicDecoder, rgbTiff } from '../heic/libheif.js';
import { decodeShrunk, planeShrink } from '../heic/planes.js';
import { sharedResize } from './shared-resize.js';
import { missingSource } from './source.js';

/**
 * @typedef {import('./work.js').Work} Work
 * @typedef {import('./plan.js').Plan} Plan
 * @typedef {{ name: import('./work.js').DecodedBy, accepts: (work: Work) => boolean, decode: (work: Work) => Promise<boolean> }} Decoder
 *   decode: false when it leaves the image to the next decoder
 */

/** @type {Decoder} */
const fromKept = {
  name: 'kept',
  accepts: (work) => Boolean(work.options.kept),
  decode: decodeKept,
};

/** @type {Decoder} */
const systemJpeg = {
  name: 'libjpeg-turbo',
  accepts: (work) => Boolean(work.options.codecs?.jpeg && work.plan.jpeg),
  decode: decodeJpeg,
};

/** @type {Decoder} */
const heicShrunk = {
  name: 'libavcodec',
  accepts: (work) => Boolean(work.plan.heic),
  decode: decodeHeicShrunk,
};

/** @type {Decoder} */
const libheif = {
  name: 'libheif',
  accepts: (work) => Boolean(work.plan.heic),
  decode: decodeHeic,
};

/** @type {Decoder} */
const fromFile = {
  name: 'sharp',
  accepts: () => true,
  decode: decodeFile,
};

/** In order: the first that accepts and decodes wins. */
export const DECODERS = [fromKept, systemJpeg, heicShrunk, libheif, fromFile];

/** @param {Work} work */
export async function decode(work) {
  for (const decoder of DECODERS) {
    if (!decoder.accepts(work) || !(await decoder.decode(work))) continue;
    work.decodedBy = decoder.name;
    return;
  }
}

/**
 * The JPEG decoded by the system's libjpeg-turbo at the DCT scale sharp would pick (the same pixels sharp's
 * own pipeline starts from); it then turns and resizes them like sharp's pipeline from the file would (an
 * EXIF-rotated one is turned before the resize instead of after: the same size, pixels within rounding).
 * False when the decoder leaves it to sharp. The pixels go back to the buffer pool once the transform is done.
 * @param {Work} work
 */
async function decodeJpeg(work) {
  const { plan: p, options } = work;
  const codecs = /** @type {import('../codecs.js').SystemCodecs} */ (options.codecs);
  const source = /** @type {import('./plan.js').JpegSource} */ (p.jpeg);
  const { buffers } = codecs;
  let jpeg;
  try {
    jpeg = await buffers.read(work.file);
  } catch (err) {
    if (isGone(err)) throw missingSource();
    throw err;
  }
  let raw;
  try {
    const scale = jpegShrinkOnLoad(shrinkOf(source.width, source.height, p));
    raw = await /** @type {import('../codecs.js').JpegCodec} */ (codecs.jpeg).decode(jpeg, scale, buffers);
  } finally {
    buffers.give(jpeg);
  }
  if (!raw) return false;
  const pixels = raw.data;
  work.release.push(() => buffers.give(pixels));
  work.image = sharp(pixels, { raw: raw.info, limitInputPixels: options.maxPixels }).timeout({
    seconds: options.timeoutS,
  });
  work.orientation = source.orientation;
  return true;
}

/** A HEIC's primary image, decoded by libheif (turned as the file says), handed to sharp with its profile. @param {Work} work */
async function decodeHeic(work) {
  const decoder = heicDecoder();
  if (!decoder)
    throw new HttpError(400, 'unsupported_format', {
      format: 'heic',
      reason: 'no HEVC decoder on this machine (libheif1, libde265-0)',
    });
  const { options } = work;
  const { tiff } = await decoder.decode(await fs.readFile(work.file), options.maxPixels);
  work.image = sharp(tiff, { limitInputPixels: options.maxPixels }).timeout({ seconds: options.timeoutS });
  work.orientation = 1;
  return true;
}

/**
 * A HEIC's primary image by libavcodec, its planes shrunk by the power of two the variant allows before they
 * become RGB; false where heic/planes.js leaves it to libheif. @param {Work} work
 */
async function decodeHeicShrunk(work) {
  const { plan: p, options } = work;
  const shown = /** @type {import('./plan.js').HeicSource} */ (p.heic);
  const factor = planeShrink(shrinkOf(shown.width, shown.height, p));
  const shrunk = await decodeShrunk(await fs.readFile(work.file), { factor, maxPixels: options.maxPixels });
  if (!shrunk) return false;
  const tiff = rgbTiff(shrunk.rgb, shrunk.width, shrunk.height, 3, shrunk.width * 3, shrunk.icc);
  work.image = sharp(tiff, { limitInputPixels: options.maxPixels }).timeout({ seconds: options.timeoutS });
  work.orientation = shrunk.orientation;
  return true;
}

/**
 * The source's kept pixels (kept-pixels.js), already decoded, upright and shrunk: no decode at all; or the
 * resized pixels of another format of this size kept beside them (shared-resize.js): no resize either.
 * @param {Work} work
 */
async function decodeKept(work) {
  const shared = sharedResize(work);
  work.sharedResize = Boolean(shared);
  const { data, width, height, channels } = shared ?? /** @type {import('./work.js').KeptPixels} */ (work.options.kept);
  work.image = sharp(data, { raw: { width, height, channels } }).timeout({ seconds: work.options.timeoutS });
  work.orientation = 1;
  return true;
}

/** sharp from the file, with the limits; it reads the orientation itself (an animation is not turned). @param {Work} work */
async function decodeFile(work) {
  const { plan: p, options } = work;
  work.image = sharp(work.file, {
    limitInputPixels: options.maxPixels,
    animated: p.animated,
    ...(p.animated && p.frames > 0 ? { pages: p.frames } : {}),
    sequentialRead: true,
    failOn: 'error',
    ignoreIcc: p.ignoreIcc,
  }).timeout({ seconds: options.timeoutS });
  work.orientation = p.animated ? 1 : 'auto';
  return true;
}

/**
 * How much sharp shrinks a width × height image (after EXIF rotation) for this plan: its ResolveShrink, the
 * larger factor for fit inside, the smaller for cover, never enlarging.
 * @param {number} width @param {number} height @param {Plan} p
 */
export function shrinkOf(width, height, p) {
  let shrink = 1;
  if (p.width && p.height) shrink = (p.fit === 'cover' ? Math.min : Math.max)(width / p.width, height / p.height);
  else if (p.width) shrink = width / p.width;
  else if (p.height) shrink = height / p.height;
  return Math.min(Math.max(1, shrink), width, height);
}

/**
 * The JPEG DCT scale sharp decodes at for a shrink: the largest of 8, 4 and 2 that it covers, halved when the
 * shrink's whole part equals it ("known libjpeg rounding errors", sharp's pipeline.cc), so both decoders start
 * from the same pixels. @param {number} shrink @returns {1 | 2 | 4 | 8}
 */
export function jpegShrinkOnLoad(shrink) {
  const scale = shrink >= 8 ? 8 : shrink >= 4 ? 4 : shrink >= 2 ? 2 : 1;
  return /** @type {1 | 2 | 4 | 8} */ (scale > 1 && Math.floor(shrink) === scale ? scale / 2 : scale);
}
