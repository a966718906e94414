// The plan: from what the source is and what was asked, the variant's size and format and how it is made
// (no pixels touched). Its cost is bounded here, before any decode.
import { HttpError } from '@stack/lib/src/errors.js';
import { frameCost } from './source.js';

const CONTENT_TYPES = {
  jpeg: 'image/jpeg',
  png: 'image/png',
  webp: 'image/webp',
  gif: 'image/gif',
  avif: 'image/avif',
};

/** @typedef {'jpeg'|'png'|'webp'|'gif'|'avif'} OutputFormat */
/**
 * @typedef {import('./source.js').SourceInfo} SourceInfo
 * @typedef {import('../options.js').Want} Want
 *   negotiated: the format follows Accept (auto, and match unless NEGOTIATE_MATCH is off)
 * @typedef {{ width: number, height: number, orientation: number }} JpegSource a JPEG the system's libjpeg-turbo
 *   may decode (see codecs.js): its size after EXIF rotation and its orientation
 * @typedef {{ width: number, height: number }} HeicSource a HEIC: its size as shown (rotation applied)
 * @typedef {{ width: number|undefined, height: number|undefined, fit: 'cover'|'inside', format: OutputFormat,
 *   animated: boolean, degraded: boolean, palette: boolean, ignoreIcc: boolean, jpeg: JpegSource | null, pixels: number, heic: HeicSource | null,
 *   lossless: boolean, fits: boolean, passthrough: boolean, frames: number, blur: boolean }} Plan
 *   lossless: a WebP of a screenshot or drawing (a still PNG or GIF) or of an animation at its own size; fits: the variant is the source's own size;
 *   passthrough: the original answers as it is (an animation past the budgets that fits); frames: how many
 *   frames are made (-1: all; fewer when an animation past the budgets is resized); blur: the placeholder
 *   (options.js BLUR_WIDTH), blurred after the resize
 */

/** @param {OutputFormat} format */
export function contentTypeOf(format) {
  return CONTENT_TYPES[format];
}

/**
 * Decides the output size and format. Never enlarges: a cover box larger than the source shrinks,
 * keeping its aspect ratio, to the largest box the source fills. The cost of a variant is bounded by its
 * pixels: past `budgets.maxPixels` it is refused; an AVIF past `budgets.avifPixels` is made in WebP when
 * the format was negotiated, refused when AVIF was asked for by name.
 * @param {SourceInfo} source @param {Want} want @param {boolean} degrade
 * @param {{ maxPixels?: number, avifPixels?: number, maxFrames?: number, maxInputPixels?: number }} [budgets] maxPixels: of the
 *   variant; maxFrames, maxInputPixels: what of an animation past them is made
 * @returns {Plan}
 */
export function plan(source, want, degrade, budgets = {}) {
  // a placeholder is the first frame's
  const animated = source.frames > 1 && !want.blur;
  let format = outputFormat(source, want, animated);
  let degraded = false;
  let { width, height } = want;
  if (want.mode === 'cover' && width && height) {
    const scale = Math.min(1, source.width / width, source.height / height);
    width = Math.max(1, Math.round(width * scale));
    height = Math.max(1, Math.round(height * scale));
  }
  const box = { width, height, cover: want.mode === 'cover' && Boolean(width && height) };
  const framePixels = outputPixels(source, box);
  const fits =
    framePixels === source.width * source.height &&
    (!box.cover || (width === source.width && height === source.height));
  // an animation past the frame or cost budget (read from its header: source.js animationCost): the original
  // answers a request it satisfies as it is; a resize of it makes its first frames, as many as the budgets allow
  const budgetFrames =
    animated && source.overBudget
      ? Math.max(
          1,
          Math.min(
            budgets.maxFrames || Infinity,
            Math.floor((budgets.maxInputPixels || Infinity) / frameCost(source.width * source.height)),
          ),
        )
      : -1;
  const passthrough = budgetFrames !== -1 && fits && originalAnswers(source, want);
  const frames = passthrough ? -1 : budgetFrames;
  const pixels = framePixels * (animated ? (frames === -1 ? source.frames : frames) : 1);
  if (!passthrough && budgets.maxPixels && pixels > budgets.maxPixels)
    throw new HttpError(400, 'output_too_large', { pixels, limit_pixels: budgets.maxPixels });
  if (format === 'avif' && budgets.avifPixels && pixels > budgets.avifPixels) {
    if (want.format === 'avif')
      throw new HttpError(400, 'output_too_large', { format: 'avif', pixels, limit_pixels: budgets.avifPixels });
    format = 'webp';
  }
  if (degrade && format === 'avif') {
    format = 'webp';
    degraded = true;
  }
  return {
    width: width || undefined,
    height: height || undefined,
    fit: want.mode === 'cover' && width && height ? 'cover' : 'inside',
    format,
    animated: animated && (format === 'webp' || format === 'gif'),
    degraded,
    palette: source.format === 'png' && source.isPalette,
    ignoreIcc: source.srgbProfile,
    jpeg:
      source.plainJpeg && !animated
        ? { width: source.width, height: source.height, orientation: source.orientation }
        : null,
    pixels,
    heic: source.isHeic ? { width: source.width, height: source.height } : null,
    lossless:
      format === 'webp' &&
      (source.format === 'png' || source.format === 'gif') &&
      Boolean(want.negotiated) &&
      (!animated || fits),
    fits,
    passthrough,
    frames,
    blur: Boolean(want.blur),
  };
}

/** The original's format as served. @param {SourceInfo} source @returns {OutputFormat | null} */
export function sourceFormat(source) {
  if (source.format === 'heif') return source.isAvif ? 'avif' : null;
  return source.format === 'tiff' ? null : /** @type {OutputFormat} */ (source.format);
}

/**
 * Whether the original's bytes may answer this request as they are: a format the request allows (its own
 * format asked for; or negotiated and the client takes it; or match without negotiation).
 * @param {SourceInfo} source @param {Want} want
 */
export function originalAnswers(source, want) {
  const own = sourceFormat(source);
  if (!own || want.blur) return false;
  if (want.format === own) return true;
  if (want.format !== 'match' && want.format !== 'auto') return false;
  if (own === 'avif') return want.accept === 'avif' || (want.format === 'match' && !want.negotiated);
  if (own === 'webp')
    return want.accept === 'avif' || want.accept === 'webp' || (want.format === 'match' && !want.negotiated);
  return true;
}

/**
 * The pixels of one frame of the variant: the box for cover, else the source scaled inside the box, never
 * enlarged. @param {{ width: number, height: number }} source
 * @param {{ width: number|null|undefined, height: number|null|undefined, cover: boolean }} box
 */
export function outputPixels(source, { width, height, cover }) {
  if (cover && width && height) return width * height;
  const scale = Math.min(1, width ? width / source.width : Infinity, height ? height / source.height : Infinity);
  return Math.max(1, Math.round(source.width * scale)) * Math.max(1, Math.round(source.height * scale));
}

/**
 * The variant's format. Negotiated (auto; match unless NEGOTIATE_MATCH is off) and the client takes them:
 * an animation as an animated WebP; a screenshot or drawing (a still PNG or GIF) as a lossless WebP (measured
 * on a screenshot: 12 KB against 245 KB of PNG and 127 KB of lossy WebP, whose artefacts show around text);
 * an animation at its own size losslessly too (its pixels are the GIF's: 16 frames of photographs, 1.29 MB
 * of GIF, 0.98 MB lossless, SSIM 1.000; 0.23 MB lossy at q80, SSIM 0.961 against the GIF), resized lossy;
 * a photograph as AVIF, else WebP. Negotiated, a client that takes neither gets the source's format (match)
 * or JPEG and PNG (auto).
 * @param {SourceInfo} source @param {Want} want @param {boolean} animated @returns {OutputFormat}
 */
function outputFormat(source, want, animated) {
  const graphic = source.format === 'png' || source.format === 'gif';
  if (want.format === 'auto' || (want.negotiated && want.accept)) {
    if (want.accept === 'avif' && !animated && !graphic) return 'avif';
    if (want.accept === 'webp' || want.accept === 'avif') return 'webp';
    if (want.format === 'auto') {
      if (animated) return 'gif';
      return source.hasAlpha ? 'png' : 'jpeg';
    }
  }
  if (want.format !== 'match') return /** @type {OutputFormat} */ (want.format);
  if (source.format === 'jpeg' || source.format === 'png' || source.format === 'webp' || source.format === 'gif')
    return source.format;
  if (source.isAvif) return 'avif';
  return source.hasAlpha ? 'png' : 'jpeg';
}
