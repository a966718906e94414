import fs from 'node:fs/promises';
import icc from 'icc';
import sharp from 'sharp';
import { GoneError, HttpError, isGone } from '@stack/lib';
import { heicDecoder } from './heic.js';

// Formats we decode. SVG is refused (it can reference external resources and script); so are PDFs etc.
const INPUT_FORMATS = new Set(['jpeg', 'png', 'webp', 'gif', 'heif', 'tiff']);
const CONTENT_TYPES = { jpeg: 'image/jpeg', png: 'image/png', webp: 'image/webp', gif: 'image/gif', avif: 'image/avif' };

/** @typedef {'jpeg'|'png'|'webp'|'gif'|'avif'} OutputFormat */
/**
 * @typedef {{ format: string, width: number, height: number, frames: number, orientation: number,
 *   hasAlpha: boolean, isPalette: boolean, isAvif: boolean, isHeic: boolean, srgbProfile: boolean, plainJpeg: boolean,
 *   overBudget?: boolean }} SourceInfo overBudget: an animation past MAX_FRAMES or MAX_INPUT_PIXELS in all its frames
 * @typedef {import('./options.js').Want} Want
 *   negotiated: the format follows Accept (auto, and match unless NEGOTIATE_MATCH is off)
 * @typedef {{ width: number, height: number, orientation: number }} JpegSource a JPEG the system's libjpeg-turbo
 *   may decode (see codecs.js): its size after EXIF rotation and its orientation
 * @typedef {{ width: number|undefined, height: number|undefined, fit: 'cover'|'inside', format: OutputFormat,
 *   animated: boolean, degraded: boolean, palette: boolean, ignoreIcc: boolean, jpeg: JpegSource | null, pixels: number, heic: boolean,
 *   lossless: boolean, fits: boolean, passthrough: boolean, frames: number }} Plan
 *   lossless: a WebP of a screenshot or drawing (a still PNG or GIF) or of an animation at its own size; fits: the variant is the source's own size;
 *   passthrough: the original answers as it is (an animation past the budgets that fits); frames: how many
 *   frames are made (-1: all; fewer when an animation past the budgets is resized)
 */

/** @param {OutputFormat} format */
export function contentTypeOf(format) {
  return CONTENT_TYPES[format];
}

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
  const overBudget = frames > limits.maxFrames || width * frameHeight * frames > limits.maxPixels;
  const readable = limits.animations && frames > 1 && width * frameHeight <= limits.maxPixels;
  if (frames > limits.maxFrames && !readable) throw new HttpError(400, 'too_many_frames', { frames, limit: limits.maxFrames });
  if (width * frameHeight * frames > limits.maxPixels && !readable) {
    throw new HttpError(400, 'image_too_large', { width, height: frameHeight, frames, limit_pixels: limits.maxPixels });
  }
  if (meta.format === 'gif' && !(await endsWithGifTrailer(file))) throw corrupt();
  const swap = (meta.orientation || 1) >= 5;
  const srgbProfile = isSrgb(meta.icc);
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
  if (!decoder) throw new HttpError(400, 'unsupported_format', { format: 'heic', reason: limits.heic ? 'no HEVC decoder on this machine (libheif1, libde265-0)' : 'HEVC decoding is off (HEIC_DECODE)' });
  const info = decoder.info(await fs.readFile(file));
  if (info.width * info.height > limits.maxPixels) {
    throw new HttpError(400, 'image_too_large', { width: info.width, height: info.height, frames: 1, limit_pixels: limits.maxPixels });
  }
  return {
    format: 'heif', width: info.width, height: info.height, frames: 1, orientation: 1, hasAlpha: info.hasAlpha, isPalette: false,
    isAvif: false, isHeic: true, srgbProfile: false, plainJpeg: false,
  };
}

/**
 * An embedded profile that is sRGB itself (cameras and editors tag most photographs so): converting
 * through it to sRGB changes nothing but costs a quarter of a photograph's transform, so it is skipped.
 * Any other profile (Display P3, Adobe RGB, CMYK) is applied. @param {Buffer|undefined} profile
 */
function isSrgb(profile) {
  if (!profile) return false;
  try {
    const parsed = icc.parse(profile);
    return parsed.colorSpace === 'RGB' && /\bsRGB\b/.test(parsed.description || '');
  } catch {
    return false;
  }
}

/** A transform that took longer than TRANSFORM_TIMEOUT_S. */
export const transformTimeout = () => new HttpError(503, 'transform_timeout', {}, { 'Retry-After': '5' });
const corrupt = () => new HttpError(400, 'invalid_image', { reason: 'corrupt or truncated image' });

/** sharp's words for a file that is not there (a cached original deleted by hand): not the image's fault. @param {unknown} err */
const isMissing = (err) => /^Input file is missing/.test(String(/** @type {Error} */ (err)?.message));

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
 * @param {string} file @param {SourceInfo} info
 */
export async function verify(file, info) {
  if (info.isHeic) {
    await /** @type {import('./heic.js').HeicDecoder} */ (heicDecoder()).decode(await fs.readFile(file), Infinity);
    return;
  }
  try {
    await sharp(file, { failOn: 'truncated', animated: info.frames > 1, limitInputPixels: false, sequentialRead: true })
      .resize(64, 64, { fit: 'inside' }).raw().toBuffer();
  } catch {
    throw corrupt();
  }
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
  const animated = source.frames > 1;
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
  const fits = framePixels === source.width * source.height && (!box.cover || (width === source.width && height === source.height));
  // an animation past the frame or pixel budget (read from its header): the original answers a request it
  // satisfies as it is; a resize of it makes its first frames, as many as the budgets allow
  const budgetFrames = animated && source.overBudget ? Math.max(1, Math.min(budgets.maxFrames || Infinity, Math.floor((budgets.maxInputPixels || Infinity) / (source.width * source.height)))) : -1;
  const passthrough = budgetFrames !== -1 && fits && originalAnswers(source, want);
  const frames = passthrough ? -1 : budgetFrames;
  const pixels = framePixels * (animated ? (frames === -1 ? source.frames : frames) : 1);
  if (!passthrough && budgets.maxPixels && pixels > budgets.maxPixels) throw new HttpError(400, 'output_too_large', { pixels, limit_pixels: budgets.maxPixels });
  if (format === 'avif' && budgets.avifPixels && pixels > budgets.avifPixels) {
    if (want.format === 'avif') throw new HttpError(400, 'output_too_large', { format: 'avif', pixels, limit_pixels: budgets.avifPixels });
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
    jpeg: source.plainJpeg && !animated ? { width: source.width, height: source.height, orientation: source.orientation } : null,
    pixels,
    heic: source.isHeic,
    lossless: format === 'webp' && (source.format === 'png' || source.format === 'gif') && Boolean(want.negotiated) && (!animated || fits),
    fits,
    passthrough,
    frames,
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
  if (!own) return false;
  if (want.format === own) return true;
  if (want.format !== 'match' && want.format !== 'auto') return false;
  if (own === 'avif') return want.accept === 'avif' || (want.format === 'match' && !want.negotiated);
  if (own === 'webp') return want.accept === 'avif' || want.accept === 'webp' || (want.format === 'match' && !want.negotiated);
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
  if (source.format === 'jpeg' || source.format === 'png' || source.format === 'webp' || source.format === 'gif') return source.format;
  if (source.isAvif) return 'avif';
  return source.hasAlpha ? 'png' : 'jpeg';
}

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
 * decode (with limits) → rotate → resize → encode. `threads`, when given, is libvips' thread count for this
 * image (a process-wide setting, read when the pipeline starts). `codecs`: the system's libjpeg-turbo and
 * libwebp (codecs.js), used for a plain JPEG original: decoded there at a DCT scale, then rotated and resized
 * by sharp to the size sharp's own pipeline gives, and encoded by libwebp when the variant is a WebP of the
 * effort libwebp's simple API has (4); anything they leave goes through sharp from the file.
 * @param {string} file @param {Plan} p
 * @param {{ maxPixels: number, timeoutS: number, threads?: number, kernel?: keyof import('sharp').KernelEnum, codecs?: import('./codecs.js').SystemCodecs } & EncodeOptions} options
 * (`kernel`: sharp's lanczos3 unless given; bench/kernel compares the others)
 * @returns {Promise<{ data: Buffer, codecs: { decode: 'libjpeg-turbo' | 'sharp', encode: 'libwebp' | 'sharp' } }>}
 */
export async function transform(file, p, options) {
  if (options.threads) sharp.concurrency(options.threads);
  const codecs = options.codecs;
  const decoded = codecs?.jpeg && p.jpeg ? await systemDecoded(file, p, p.jpeg, codecs, options) : null;
  try {
    const image = decoded?.image || (p.heic ? await fromHeic(file, p, options) : fromFile(file, p, options));
    if (decoded && codecs?.webp && p.format === 'webp' && !p.degraded && options.webpEffort === 4) {
      const pixels = await sharpOutput(image.raw().toBuffer({ resolveWithObject: true }));
      return { data: await codecs.webp.encode(pixels, options.webpQuality), codecs: { decode: 'libjpeg-turbo', encode: 'libwebp' } };
    }
    return { data: await sharpOutput(encode(image, p, options).toBuffer()), codecs: { decode: decoded ? 'libjpeg-turbo' : 'sharp', encode: 'sharp' } };
  } finally {
    if (decoded) codecs?.buffers.give(decoded.pixels);
  }
}

/** @param {string} file @param {Plan} p @param {Parameters<typeof transform>[2]} options */
function fromFile(file, p, options) {
  let image = sharp(file, {
    limitInputPixels: options.maxPixels,
    animated: p.animated,
    ...(p.animated && p.frames > 0 ? { pages: p.frames } : {}),
    sequentialRead: true,
    failOn: 'error',
    ignoreIcc: p.ignoreIcc,
  }).timeout({ seconds: options.timeoutS });
  if (!p.animated) image = image.rotate();
  return image.resize(resizeOptions(p, options));
}

/**
 * A HEIC's primary image, decoded by libheif (turned as the file says) and handed to sharp with its profile.
 * @param {string} file @param {Plan} p @param {Parameters<typeof transform>[2]} options
 */
async function fromHeic(file, p, options) {
  const decoder = heicDecoder();
  if (!decoder) throw new HttpError(400, 'unsupported_format', { format: 'heic', reason: 'no HEVC decoder on this machine (libheif1, libde265-0)' });
  const { tiff } = await decoder.decode(await fs.readFile(file), options.maxPixels);
  return sharp(tiff, { limitInputPixels: options.maxPixels }).timeout({ seconds: options.timeoutS }).resize(resizeOptions(p, options));
}

/**
 * From the file or from pixels decoded at a DCT scale, sharp works out the size from what it has decoded (as
 * after its own shrink-on-load), so both give the same size and crop.
 * @param {Plan} p @param {Parameters<typeof transform>[2]} options @returns {import('sharp').ResizeOptions}
 */
function resizeOptions(p, options) {
  return { width: p.width, height: p.height, fit: p.fit, position: 'centre', withoutEnlargement: true, kernel: options.kernel };
}

/**
 * The JPEG decoded by the system's libjpeg-turbo at the DCT scale sharp would pick, then oriented and resized
 * by sharp: the same bytes as sharp's own pipeline from the file (an EXIF-rotated one is turned before the
 * resize instead of after: the same size, pixels within rounding); null when the decoder leaves it to sharp.
 * `pixels` goes back to the buffer pool once sharp is done with it.
 * @param {string} file @param {Plan} p @param {JpegSource} source @param {import('./codecs.js').SystemCodecs} codecs
 * @param {Parameters<typeof transform>[2]} options
 */
async function systemDecoded(file, p, source, codecs, options) {
  const { buffers } = codecs;
  let jpeg;
  try {
    jpeg = await buffers.read(file);
  } catch (err) {
    if (isGone(err)) throw missingSource();
    throw err;
  }
  let raw;
  try {
    const scale = jpegShrinkOnLoad(shrinkOf(source.width, source.height, p));
    raw = await /** @type {import('./codecs.js').JpegDecoder} */ (codecs.jpeg).decode(jpeg, scale, buffers);
  } finally {
    buffers.give(jpeg);
  }
  if (!raw) return null;
  const image = orient(sharp(raw.data, { raw: raw.info, limitInputPixels: options.maxPixels }).timeout({ seconds: options.timeoutS }), source.orientation);
  return { image: image.resize(resizeOptions(p, options)), pixels: raw.data };
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

/**
 * EXIF orientation applied to pixels that carry none (what sharp's rotate() does from the metadata).
 * @param {import('sharp').Sharp} image @param {number} orientation
 */
function orient(image, orientation) {
  const turns = /** @type {Record<number, [number, boolean, boolean]>} */ ({
    1: [0, false, false], 2: [0, false, true], 3: [180, false, false], 4: [0, true, false],
    5: [90, true, false], 6: [90, false, false], 7: [270, true, false], 8: [270, false, false],
  })[orientation] || [0, false, false];
  const [angle, flip, flop] = turns;
  if (angle) image = image.rotate(angle);
  if (flip) image = image.flip();
  if (flop) image = image.flop();
  return image;
}

/**
 * A sharp pipeline's output, its failures in the service's words.
 * @template T @param {Promise<T>} output @returns {Promise<T>}
 */
async function sharpOutput(output) {
  try {
    return await output;
  } catch (err) {
    const message = String(/** @type {Error} */ (err).message);
    if (/timeout/i.test(message)) throw transformTimeout();
    if (isMissing(err)) throw missingSource();
    throw corrupt();
  }
}

/** @typedef {{ jpegQuality: number, jpegProgressive: boolean, jpegTrellis: boolean, webpQuality: number, webpEffort: number, avifQuality: number, avifEffort: number, jpegTable?: number }} EncodeOptions */

/**
 * JPEG as mozjpeg's libjpeg writes it with libjpeg's standard quantisation tables and optimised Huffman tables,
 * baseline unless JPEG_PROGRESSIVE. Measured on the real photographs (bench/effort): the standard tables keep
 * more SSIM per byte than mozjpeg's table 3 (q78: 21.99 KB at 0.9685; table 3 at q80: 22.01 KB at 0.9671), and
 * mozjpeg's progressive scans cost 5–10 % more CPU per variant for 1.5 % fewer bytes. Trellis quantisation
 * and scan optimisation (mozjpeg's own defaults, with its table 3) cost 4× the encode time for about 4 % fewer
 * bytes at equal SSIM: a setting, off by default. `jpegTable` (bench/effort only) picks another table.
 * @param {EncodeOptions} o @returns {import('sharp').JpegOptions}
 */
function jpegOptions(o) {
  if (o.jpegTrellis) return { quality: o.jpegQuality, progressive: true, mozjpeg: true };
  return { quality: o.jpegQuality, progressive: o.jpegProgressive, optimiseCoding: true, quantisationTable: o.jpegTable ?? 0 };
}

/** @param {import('sharp').Sharp} image @param {Plan} p @param {EncodeOptions} o */
function encode(image, p, o) {
  switch (p.format) {
    case 'jpeg':
      return image.flatten({ background: '#ffffff' }).jpeg(jpegOptions(o));
    case 'png':
      return image.png({ palette: p.palette, compressionLevel: 6, effort: 4 });
    case 'webp':
      return image.webp({ quality: o.webpQuality, effort: p.degraded ? 1 : o.webpEffort, lossless: p.lossless });
    case 'gif':
      return image.gif({ effort: 4 });
    default:
      return image.avif({ quality: o.avifQuality, effort: o.avifEffort });
  }
}
