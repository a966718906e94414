// The encode step: the first encoder of ENCODERS that takes the variant. The system's libwebp (codecs.js)
// encodes a lossy WebP from pixels the system's libjpeg-turbo decoded (or kept pixels without alpha), at any
// effort (a degraded one's too); sharp encodes everything else.
import { imageOf, sharpOutput } from './work.js';

/**
 * @typedef {import('./work.js').Work} Work
 * @typedef {{ name: 'libwebp' | 'sharp', accepts: (work: Work) => boolean, encode: (work: Work) => Promise<Buffer> }} Encoder
 */

/** @type {Encoder} */
const systemWebp = {
  name: 'libwebp',
  accepts: ({ plan: p, options, decodedBy }) =>
    (decodedBy === 'libjpeg-turbo' || (decodedBy === 'kept' && options.kept?.channels === 3)) &&
    Boolean(options.codecs?.webp) &&
    p.format === 'webp' &&
    !p.lossless,
  async encode(work) {
    const pixels = await sharpOutput(imageOf(work).raw().toBuffer({ resolveWithObject: true }));
    const webp = /** @type {import('../codecs.js').WebpEncoder} */ (work.options.codecs?.webp);
    return webp.encode(pixels, work.options.webpQuality, webpEffortOf(work.plan, work.options));
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
  encode: (work) => sharpOutput(sharpEncoded(imageOf(work), work.plan, work.options).toBuffer()),
};

/** In order: the first that accepts encodes. */
export const ENCODERS = [systemWebp, bySharp];

/** @param {Work} work */
export async function encode(work) {
  const encoder = /** @type {Encoder} */ (ENCODERS.find((one) => one.accepts(work)));
  work.data = await encoder.encode(work);
  work.encodedBy = encoder.name;
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
    quality: o.jpegQuality,
    progressive: o.jpegProgressive,
    optimiseCoding: true,
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
