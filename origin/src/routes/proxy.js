import querystring from 'node:querystring';
import { HttpError, base58Url, errorAnswer, isGone, logRequest, paramsOf, requestIdOf } from '@stack/lib';
import { parseWant } from '../options.js';
import { SEND_OPTIONS } from './send.js';
import { contentTypeOf } from '../pipeline/index.js';

/**
 * @typedef {{ images: ReturnType<typeof import('../images.js').createImages>, config: import('@stack/lib/src/config-types.js').OriginConfig,
 *   metrics: import('../metrics.js').OriginMetrics, guard: import('../takedown.js').Guard, whitelist: import('../whitelist.js').Whitelist }} ProxyDeps
 * @typedef {{ headers: Record<string, string>, variant: import('../images.js').Variant }} ProxyAnswer
 * @typedef {{ query: Record<string, unknown>, accept: string | undefined, paths: (string | undefined)[], warm: boolean,
 *   token: unknown }} ProxyRequest
 *   what a request asks: `paths`, where it was asked (for takedowns); `warm`, a warmer's (X-Warm: 1, made only
 *   on idle capacity: variant/warm.js); `token`, a preview token (?token=, or X-Preview-Token from varnish,
 *   which keeps it out of its key)
 */

/** The bytes a variant's answer carries. @param {import('../images.js').Variant} variant */
const bytesOf = (variant) => (variant.cached ? variant.cached.size : /** @type {Buffer} */ (variant.data).length);

// ecency's render-helper (src/proxify-image-src.ts) appends ".webp" or ".png" to the base58 part; base58
// has no ".", so a file extension there is only a name: the format comes from the query, as ever
const EXTENSION = /\.(?:webp|png|jpe?g|gif|avif)$/i;

/** @param {string} encoded */
const withoutExtension = (encoded) => encoded.replace(EXTENSION, '');

/**
 * GET /p/<base58(url)>: a remote (or own) image, resized and encoded: the variant and the headers of its 200.
 * Shared by the Express route and the fast path, so both answer alike.
 * A taken-down source is a 451 before any work, and again if it was taken down while its variant was made; a
 * remote one the proxy whitelist does not hold is a 403 (whitelist.js), before the result cache is looked at.
 * Every answer about a source (its image or its 451) is remembered under `paths`, for takedowns.
 * @param {ProxyDeps} deps
 * @returns {(encoded: string, request: ProxyRequest) => Promise<ProxyAnswer>}
 */
function proxyAnswer({ images, config, guard, whitelist }) {
  return async (encoded, { query, accept, paths, warm, token }) => {
    const text = base58Url.decode(withoutExtension(encoded));
    if (!text) throw new HttpError(400, 'invalid_url', { reason: 'not base58' });
    const want = parseWant(query, accept, config);
    const source = images.resolveSource(text);
    // remembered once it is answered (a source that fails to load never pushes real ones out of the log)
    const remember = () => guard.served(source, paths);
    await guard.check(source).catch((err) => {
      remember();
      throw err;
    });
    const access = await whitelist.check(source, token);
    const variant = await images.variant(source, want, { warm });
    remember();
    await guard.check(source);
    /** @type {Record<string, string>} */
    const headers = {
      'Content-Type': contentTypeOf(variant.format),
      'Cache-Control': variant.firstAnswer
        ? config.CACHE_CONTROL_FIRST_ANSWER
        : variant.degraded
          ? config.CACHE_CONTROL_DEGRADED
          : config.CACHE_CONTROL_IMMUTABLE,
      ETag: `"${variant.variantKey.slice(0, 32)}${variant.degraded ? '-d' : ''}"`,
      xkey: `img:${source.id}`,
      'Server-Timing': serverTiming(variant.timings),
      'X-Content-Type-Options': 'nosniff',
    };
    // an animation too costly to transform (MAX_FRAMES, MAX_INPUT_PIXELS): its original, and why
    if (variant.asOriginal) headers['X-Served-Original'] = variant.asOriginal;
    // let through by a preview token alone: for the editor that holds it, never for a shared cache
    if (access.private) headers['Cache-Control'] = 'private, no-store';
    if (want.negotiated) {
      headers.Vary = 'Accept';
      // a CDN that ignores Vary would serve this answer to every browser: it must not keep it
      if (!config.CDN_VARY_ACCEPT)
        Object.assign(headers, { 'CDN-Cache-Control': 'no-store', 'Cloudflare-CDN-Cache-Control': 'no-store' });
    }
    return { headers, variant };
  };
}

/**
 * GET /p/<base58(url)> in Express: what the fast path leaves to it (conditional and range requests, URLs
 * in another spelling).
 * @param {ProxyDeps} deps
 * @returns {import('express').RequestHandler}
 */
export function proxyRoute(deps) {
  const answer = proxyAnswer(deps);
  return (req, res, next) => {
    res.locals.route = 'proxy';
    const fail = (/** @type {unknown} */ err) => {
      deps.metrics.rejections.inc({ reason: /** @type {any} */ (err).name || 'error' });
      next(err);
    };
    const respond = async (retried = false) => {
      const { headers, variant } = await answer(paramsOf(req).encoded, proxyRequest(req, req.query));
      const sent = () => deps.metrics.bytes.inc({ direction: 'out' }, bytesOf(variant));
      res.set(headers);
      if (!variant.cached) {
        sent();
        return res.send(variant.data);
      }
      // send answers the range and conditional requests within the variant's bytes in the cache's file
      const { file, start, end } = deps.images.cachedFile(variant.cached);
      return res.sendFile(file, { ...SEND_OPTIONS, start, end }, (err) => {
        if (!err) sent();
        else if (forgetIfMissing(deps, err, variant, retried, res)) respond(true).catch(fail);
        else fail(err);
      });
    };
    respond().catch(fail);
  };
}

/**
 * Whether to answer again after sending a cached variant failed: its file was gone (deleted by hand, a disk
 * swapped), nothing was sent yet, and this was the first try. The variant leaves the index, so the second
 * try makes it again. @param {ProxyDeps} deps @param {unknown} err @param {import('../images.js').Variant} variant
 * @param {boolean} retried @param {import('node:http').ServerResponse} res
 */
function forgetIfMissing(deps, err, variant, retried, res) {
  if (retried || res.headersSent || !isGone(err)) return false;
  deps.images.forgetVariant(variant.variantKey);
  return true;
}

// /p/<base58>, an optional filename, the query: the URLs Hive frontends and varnish send. Anything else
// (percent-escapes, an empty segment) goes through Express, which answers or refuses it as usual.
const CANONICAL = /^\/p\/([1-9A-HJ-NP-Za-km-z]+(?:\.[a-z]{3,4})?)(?:\/[^/?%]*)?(?:\?(.*))?$/;

/**
 * The proxy on the plain `http` request, without Express's per-request work (routing, the request and
 * response decorations, the query middleware, two `finish` listeners): a new variant costs the event loop
 * about 2 ms, and Express was a tenth of it. Same answer in every respect (headers, JSON errors,
 * X-Request-Id, request metrics and log line). Conditional and range requests stay with Express, whose
 * `send` implements them. Returns false for what it leaves to Express.
 * @param {ProxyDeps & { observe: (route: string, status: number, started: number) => void,
 *   logger: import('pino').Logger }} deps
 * @returns {(req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse) => boolean}
 */
export function proxyFastPath(deps) {
  const answer = proxyAnswer(deps);
  const { observe, logger, metrics, config } = deps;
  return (req, res) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') return false;
    const { headers } = req;
    if (headers['if-none-match'] || headers['if-modified-since'] || headers.range) return false;
    const match = CANONICAL.exec(req.url || '');
    if (!match) return false;
    const started = performance.now();
    const reqId = requestIdOf(req);
    /** @param {number} status @param {string} [error] */
    const done = (status, error) => {
      observe('proxy', status, started);
      logRequest(logger, { reqId, method: req.method, url: req.url, status, started, error });
    };
    /** @param {unknown} err */
    const fail = (err) => {
      metrics.rejections.inc({ reason: /** @type {any} */ (err).name || 'error' });
      if (res.headersSent) {
        res.destroy();
        return done(res.statusCode, String(err));
      }
      const { httpError, headers: errorHeaders, unhandled } = errorAnswer(err, config.CACHE_CONTROL_NEGATIVE);
      const body = JSON.stringify(httpError);
      res.writeHead(httpError.status, {
        ...errorHeaders,
        'Content-Type': 'application/json; charset=utf-8',
        'Content-Length': Buffer.byteLength(body),
        'X-Request-Id': reqId,
      });
      res.end(body);
      done(httpError.status, unhandled);
    };
    const query = querystring.parse(match[2] || '');
    const respond = async (retried = false) => {
      const { headers: answerHeaders, variant } = await answer(match[1], proxyRequest(req, query));
      const head = req.method === 'HEAD';
      let data = variant.data;
      if (variant.cached && !head) {
        try {
          data = await deps.images.readCached(variant.cached);
        } catch (err) {
          if (forgetIfMissing(deps, err, variant, retried, res)) return respond(true);
          throw err;
        }
      }
      res.writeHead(200, { ...answerHeaders, 'Content-Length': bytesOf(variant), 'X-Request-Id': reqId });
      res.end(head ? undefined : data);
      metrics.bytes.inc({ direction: 'out' }, bytesOf(variant));
      return done(200);
    };
    respond().catch(fail);
    return true;
  };
}

/**
 * What a request asks, read alike by the Express route and the fast path.
 * @param {import('node:http').IncomingMessage & { originalUrl?: string }} req @param {Record<string, unknown>} query
 * @returns {ProxyRequest}
 */
function proxyRequest(req, query) {
  const { headers } = req;
  return {
    query,
    accept: headers.accept,
    paths: publicPaths(req),
    warm: headers['x-warm'] === '1',
    token: query.token ?? headers['x-preview-token'],
  };
}

/**
 * The paths a request was asked under: as the origin got it, and as the client (or the CDN) asked varnish
 * for it (varnish sets X-Public-Path before it normalises the URL).
 * @param {import('node:http').IncomingMessage & { originalUrl?: string }} req
 */
export function publicPaths(req) {
  const given = req.headers['x-public-path'];
  return [req.originalUrl || req.url, typeof given === 'string' && given.startsWith('/') ? given : undefined];
}

/** @param {import('../images.js').Timings} timings */
export function serverTiming(timings) {
  const parts = Object.entries(timings).map(([name, ms]) => `${name};dur=${/** @type {number} */ (ms).toFixed(1)}`);
  return parts.length ? parts.join(', ') : 'cache;desc=hit';
}
