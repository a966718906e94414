import { HttpError, base58Url } from '@stack/lib';
import { contentTypeOf } from '../transform.js';

const MODES = new Set(['cover', 'fit']);
const FORMATS = new Set(['match', 'jpeg', 'png', 'webp', 'avif', 'auto']);

/**
 * @param {unknown} value @param {string} name @param {number} cap
 * @returns {number | null} null when absent or 0 (keep that dimension)
 */
function dimension(value, name, cap) {
  if (value === undefined || value === '') return null;
  if (typeof value !== 'string' || !/^\d{1,9}$/.test(value)) {
    throw new HttpError(400, 'invalid_parameter', { name, reason: 'expected a whole number of pixels' });
  }
  const number = Number(value);
  return number === 0 ? null : Math.min(number, cap);
}

/** avif > webp > nothing, from the Accept header (varnish already narrowed it). @param {string | undefined} accept */
export function acceptClass(accept = '') {
  if (/image\/avif/i.test(accept)) return 'avif';
  if (/image\/webp/i.test(accept)) return 'webp';
  return '';
}

/** @param {import('express').Request} req @param {Record<string, any>} config @returns {import('../transform.js').Request} */
export function parseWant(req, config) {
  const query = req.query;
  const mode = query.mode === undefined ? 'cover' : String(query.mode);
  const format = query.format === undefined ? 'match' : String(query.format);
  if (!MODES.has(mode)) throw new HttpError(400, 'invalid_parameter', { name: 'mode', allowed: [...MODES] });
  if (!FORMATS.has(format)) throw new HttpError(400, 'invalid_parameter', { name: 'format', allowed: [...FORMATS] });
  let width = dimension(query.width, 'width', config.MAX_DIMENSION);
  let height = dimension(query.height, 'height', config.MAX_DIMENSION);
  let chosenMode = /** @type {'cover'|'fit'} */ (mode);
  if (!width && !height) {
    width = config.DEFAULT_WIDTH;
    height = config.DEFAULT_HEIGHT;
    chosenMode = 'fit';
  }
  return { width, height, mode: chosenMode, format, accept: format === 'auto' ? acceptClass(req.headers.accept) : '' };
}

/**
 * GET /p/<base58(url)>: a remote (or own) image, resized and encoded.
 * @param {{ images: ReturnType<typeof import('../images.js').createImages>, config: Record<string, any>,
 *   metrics: import('../metrics.js').OriginMetrics }} deps
 * @returns {import('express').RequestHandler}
 */
export function proxyRoute({ images, config, metrics }) {
  return async (req, res, next) => {
    res.locals.route = 'proxy';
    try {
      const text = base58Url.decode(req.params.encoded);
      if (!text) throw new HttpError(400, 'invalid_url', { reason: 'not base58' });
      const want = parseWant(req, config);
      const source = images.resolveSource(text);
      const result = await images.variant(source, want);
      res.set({
        'Content-Type': contentTypeOf(result.format),
        'Cache-Control': result.degraded ? config.CACHE_CONTROL_DEGRADED : config.CACHE_CONTROL_IMMUTABLE,
        ETag: `"${result.variantKey.slice(0, 32)}${result.degraded ? '-d' : ''}"`,
        xkey: `img:${source.id}`,
        'Server-Timing': serverTiming(result.timings),
        'X-Content-Type-Options': 'nosniff',
      });
      if (want.format === 'auto') res.vary('Accept');
      if (result.file) {
        metrics.bytes.inc({ direction: 'out' }, result.size || 0);
        res.sendFile(result.file, { etag: false, lastModified: false, cacheControl: false }, (err) => err && next(err));
      } else {
        metrics.bytes.inc({ direction: 'out' }, /** @type {Buffer} */ (result.data).length);
        res.send(result.data);
      }
    } catch (err) {
      metrics.rejections.inc({ reason: /** @type {any} */ (err).name || 'error' });
      next(err);
    }
  };
}

/** @param {import('../images.js').Timings} timings */
export function serverTiming(timings) {
  const parts = Object.entries(timings).map(([name, ms]) => `${name};dur=${/** @type {number} */ (ms).toFixed(1)}`);
  return parts.length ? parts.join(', ') : 'cache;desc=hit';
}
