// A request's options, parsed apart from the routes that take them: the size (as images.hive.blog reads it,
// capped and snapped to ALLOWED_SIZES), the mode, the format and the Accept class a negotiated format is
// made for. The answer is a Want, what every later step (images.js, the pipeline) works from.
import { HttpError, allowedSizeList } from '@stack/lib';

/**
 * @typedef {{ width: number|null, height: number|null, mode: 'cover'|'fit', format: string, accept: 'avif'|'webp'|'', negotiated?: boolean,
 *   blur?: boolean }} Want
 *   what a request asks to be made of a source (`accept`: the class a negotiated format is made for; `blur`:
 *   the placeholder ecency shows while the image loads)
 */

/**
 * ecency's feeds ask `blur=1` (render-helper proxifyImageSrc, `opts.blur`): a JPEG at most this wide, blurred,
 * whatever size was asked beside it (ecency's imagehoster resizes to 20 px last, so the asked size never
 * counts): one placeholder per source, the source's shape.
 */
export const BLUR_WIDTH = 20;

/** Whether a request asks for the placeholder: `blur=1` or `blur=true` (the first, if repeated). @param {unknown} value */
export function blurAsked(value) {
  const text = Array.isArray(value) ? value[0] : value;
  return text === '1' || text === 'true';
}

const MODES = new Set(['cover', 'fit']);
const FORMATS = new Set(['match', 'jpeg', 'png', 'webp', 'avif', 'auto']);
// other spellings images.hive.blog accepts (src/proxy.ts: "jpg")
const FORMAT_ALIASES = new Map([['jpg', 'jpeg']]);

/**
 * A size as images.hive.blog reads it (`Number.parseInt(value) || undefined`, imagehoster src/proxy.ts): the
 * leading whole number counts ("640.5" and "640px" are 640, what a frontend multiplying by the pixel ratio
 * sends), and a value without one ("abc", "") is no size at all. A negative size is refused (imagehoster
 * fails inside sharp there). Repeated, the first counts.
 * @param {unknown} value @param {string} name
 * @returns {number | null} null when absent, 0 or not a number (keep that dimension)
 */
function dimension(value, name) {
  const text = Array.isArray(value) ? value[0] : value;
  if (typeof text !== 'string') return null;
  const number = Number.parseInt(text, 10);
  if (Number.isNaN(number) || number === 0) return null;
  if (number < 0)
    throw new HttpError(400, 'invalid_parameter', { name, reason: 'a size is a positive number of pixels' });
  return number;
}

/**
 * A requested size as it is made: at most MAX_DIMENSION, and with ALLOWED_SIZES the next listed size up
 * (the largest past them all). varnish's key follows the same rule (infra/render/varnish.js varnishSizes).
 * @param {number} size @param {Record<string, any>} config
 */
export function canonicalSize(size, config) {
  const capped = Math.min(size, config.MAX_DIMENSION);
  const allowed = allowedSizes(config);
  if (!allowed.length) return capped;
  return allowed.find((listed) => listed >= capped) ?? allowed[allowed.length - 1];
}

/** @type {WeakMap<object, number[]>} */
const sortedSizes = new WeakMap();

/** ALLOWED_SIZES as numbers, ascending (read once per config). @param {Record<string, any>} config @returns {number[]} */
export function allowedSizes(config) {
  const known = sortedSizes.get(config);
  if (known) return known;
  const sizes = allowedSizeList(config.ALLOWED_SIZES || [], config.MAX_DIMENSION);
  sortedSizes.set(config, sizes);
  return sizes;
}

/** The media types an Accept header accepts: listed with a q above 0 (a missing q is 1). @param {string} accept */
function acceptedTypes(accept) {
  const types = new Set();
  for (const entry of accept.split(',')) {
    const [type, ...params] = entry.split(';').map((part) => part.trim().toLowerCase());
    const q = params.map((param) => /^q\s*=\s*([\d.]+)$/.exec(param)).find(Boolean);
    if (type && (!q || Number(q[1]) > 0)) types.add(type);
  }
  return types;
}

/** avif > webp > nothing, from the Accept header (varnish already narrowed it, by the same rules). @param {string | undefined} accept */
export function acceptClass(accept = '') {
  const types = acceptedTypes(accept);
  if (types.has('image/avif')) return 'avif';
  if (types.has('image/webp')) return 'webp';
  return '';
}

/**
 * @param {Record<string, unknown>} query the parsed query string @param {string | undefined} accept
 * @param {Record<string, any>} config @returns {Want}
 */
export function parseWant(query, accept, config) {
  if (blurAsked(query.blur))
    return { width: BLUR_WIDTH, height: null, mode: 'fit', format: 'jpeg', accept: '', negotiated: false, blur: true };
  const mode = query.mode === undefined ? 'cover' : String(query.mode);
  const given = query.format === undefined ? 'match' : String(query.format);
  const format = FORMAT_ALIASES.get(given) || given;
  if (!MODES.has(mode)) throw new HttpError(400, 'invalid_parameter', { name: 'mode', allowed: [...MODES] });
  if (!FORMATS.has(format)) throw new HttpError(400, 'invalid_parameter', { name: 'format', allowed: [...FORMATS] });
  const sized = (/** @type {number | null} */ size) => (size === null ? null : canonicalSize(size, config));
  let width = sized(dimension(query.width, 'width'));
  let height = sized(dimension(query.height, 'height'));
  let chosenMode = /** @type {'cover'|'fit'} */ (mode);
  if (!width && !height) {
    width = config.DEFAULT_WIDTH;
    height = config.DEFAULT_HEIGHT;
    chosenMode = 'fit';
  }
  // format=match (the default: condenser's and ecency's URLs) is negotiated from Accept as auto is, unless
  // NEGOTIATE_MATCH is off; a client that names no modern format gets the source's format either way
  const negotiated = format === 'auto' || (format === 'match' && Boolean(config.NEGOTIATE_MATCH));
  return { width, height, mode: chosenMode, format, accept: negotiated ? acceptClass(accept) : '', negotiated };
}
