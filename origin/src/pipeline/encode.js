// The encode step: the first encoder of ENCODERS that takes the variant. From RGB pixels without alpha (the
// system's libjpeg-turbo decoded them, or kept pixels of three channels), the system's codecs (codecs.js)
// encode a lossy WebP (libwebp, at any effort, a degraded one's too) and a JPEG (libjpeg-turbo, unless
// trellis quantisation, which is mozjpeg's own), each to the very bytes sharp would write; sharp encodes
// everything else.
import sharp from 'sharp';
import { sharpJpegOptions } from '../codecs.js';
import { keepResize, mayKeepResize } from './shared-resize.js';
import { imageOf, sharpOutput } from './work.js';

/**
 * @typedef {import('./work.js').Work} Work
 * @typedef {{ name: import('./work.js').EncodedBy, accepts: (work: Work) => boolean, encode: (work: Work) => Promise<Buffer> }} Encoder
 */

/** Whether the work's pixels are RGB without alpha, as the system's encoders take them. @param {Work} work */
const rgbPixels = ({ options, decodedBy }) =>
  decodedBy === 'libjpeg-turbo' || (decodedBy === 'kept' && options.kept?.channels === 3);

/**
 * The work's pixels after every step before the encode, raw; resized from kept pixels, they stay beside them
 * for the other formats of the size (shared-resize.js). @param {Work} work
 */
async function rawPixels(work) {
  const raw = await sharpOutput(imageOf(work).raw().toBuffer({ resolveWithObject: true }));
  keepResize(work, raw);
  return raw;
}

/** @type {Encoder} */
const systemWebp = {
  name: 'libwebp',
  accepts: (work) =>
    rgbPixels(work) && Boolean(work.options.codecs?.webp) && work.plan.format === 'webp' && !work.plan.lossless,
  async encode(work) {
    const webp = /** @type {import('../codecs.js').WebpEncoder} */ (work.options.codecs?.webp);
    return webp.encode(await rawPixels(work), work.options.webpQuality, webpEffortOf(work.plan, work.options));
  },
};

/**
 * Past this many pixels a JPEG variant is sharp's, which encodes it in strips as it resizes: the system's
 * encoder takes the whole picture raw first. The system's decoder has the same bound (codecs.js), so only kept
 * pixels of a large KEPT_PIXELS_WIDTH could come this far.
 */
const MAX_RAW_JPEG_PIXELS = 16 * 1024 * 1024;

/** @type {Encoder} */
const systemJpeg = {
  name: 'libjpeg-turbo',
  accepts: (work) =>
    rgbPixels(work) &&
    Boolean(work.options.codecs?.jpeg) &&
    work.options.codecs?.jpeg?.agrees !== false &&
    work.plan.format === 'jpeg' &&
    work.plan.pixels <= MAX_RAW_JPEG_PIXELS &&
    !work.plan.blur &&
    !work.options.jpegTrellis &&
    !work.options.jpegTable,
  async encode(work) {
    const codecs = /** @type {import('../codecs.js').SystemCodecs} */ (work.options.codecs);
    const jpeg = /** @type {import('../codecs.js').JpegCodec} */ (codecs.jpeg);
    const { jpegQuality: quality, jpegProgressive: progressive } = work.options;
    const pixels = await rawPixels(work);
    const made = await jpeg.encode(pixels, { quality, progressive }, codecs.buffers);
    if (made) return made;
    // this process's libjpeg-turbo does not write sharp's bytes (codecs.js): sharp encodes the pixels
    work.encodedBy = 'sharp';
    return sharpOutput(sharp(pixels.data, { raw: pixels.info }).jpeg(jpegOptions(work.options)).toBuffer());
  },
};

/**
 * A lossy WebP's effort: WEBP_EFFORT, or 1 for a degraded answer (a deep queue).
 * @param {import('./plan.js').Plan} p @param {import('./work.js').EncodeOptions} o
 */
const webpEffortOf = (p, o) => (p.degraded ? 1 : o.webpEffort);

/** @type {Encoder} */
const bySharp = {
  name: 'sharp',
  accepts: () => true,
  async encode(work) {
    // resized from kept pixels: made raw first, so the other formats of the size share them (an AVIF's with
    // the WebP's that follows it), then encoded from them
    let image = imageOf(work);
    if (mayKeepResize(work)) {
      const raw = await rawPixels(work);
      image = sharp(raw.data, { raw: raw.info }).timeout({ seconds: work.options.timeoutS });
    }
    return sharpOutput(sharpEncoded(image, work.plan, work.options).toBuffer());
  },
};

/** In order: the first that accepts encodes. */
export const ENCODERS = [systemWebp, systemJpeg, bySharp];

/** @param {Work} work */
export async function encode(work) {
  const encoder = /** @type {Encoder} */ (ENCODERS.find((one) => one.accepts(work)));
  // named first: an encoder that leaves the pixels to sharp after all says so
  work.encodedBy = encoder.name;
  work.data = await encoder.encode(work);
}

/**
 * JPEG as mozjpeg's libjpeg writes it with libjpeg's standard quantisation tables and optimised Huffman tables,
 * baseline unless JPEG_PROGRESSIVE. Measured on the real photographs (bench/effort): the standard tables keep
 * more SSIM per byte than mozjpeg's table 3 (q78: 21.99 KB at 0.9685; table 3 at q80: 22.01 KB at 0.9671), and
 * mozjpeg's progressive scans cost 5–10 % more CPU per variant for 1.5 % fewer bytes. Trellis quantisation
 * and scan optimisation (mozjpeg's own defaults, with its table 3) cost 4× the encode time for about 4 % fewer
 * bytes at equal SSIM: a setting, off by default. `jpegTable` (bench/effort only) picks another table.
 * @param {import('./work.js').EncodeOptions} o @returns {import('sharp').JpegOptions}
 */
function jpegOptions(o) {
  if (o.jpegTrellis) return { quality: o.jpegQuality, progressive: true, mozjpeg: true };
  return {
    ...sharpJpegOptions({ quality: o.jpegQuality, progressive: o.jpegProgressive }),
    quantisationTable: o.jpegTable ?? 0,
  };
}

/**
 * A placeholder's JPEG: at 20 pixels and blurred, quality buys nothing the eye sees; at 40 a photograph's is
 * about 700 bytes (ecency's imagehoster asks 15), baseline (a placeholder is shown whole or not at all).
 */
const BLUR_JPEG = { quality: 40, progressive: false, optimiseCoding: true };

/** @param {import('sharp').Sharp} image @param {import('./plan.js').Plan} p @param {import('./work.js').EncodeOptions} o */
function sharpEncoded(image, p, o) {
  if (p.blur) return image.flatten({ background: '#ffffff' }).jpeg(BLUR_JPEG);
  switch (p.format) {
    case 'jpeg':
      return image.flatten({ background: '#ffffff' }).jpeg(jpegOptions(o));
    case 'png':
      return image.png({ palette: p.palette, compressionLevel: 6, effort: 4 });
    case 'webp':
      return image.webp({ quality: o.webpQuality, effort: webpEffortOf(p, o), lossless: p.lossless });
    case 'gif':
      return image.gif({ effort: 4 });
    default:
      return image.avif({ quality: o.avifQuality, effort: o.avifEffort });
  }
}
