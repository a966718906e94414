import querystring from 'node:querystring';
import fresh from 'fresh';
import send from 'send';
import { HttpError, base58Url, isGone, plainRoute } from '@stack/lib';
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

/** A variant's answer counted in the bytes sent. @param {ProxyDeps['metrics']} metrics @param {import('../images.js').Variant} variant */
const countSent = (metrics, variant) => metrics.bytes.inc({ direction: 'out' }, bytesOf(variant));

// ecency's render-helper (src/proxify-image-src.ts) appends ".webp" or ".png" to the base58 part; base58
// has no ".", so a file extension there is only a name: the format comes from the query, as ever
const EXTENSION = /\.(?:webp|png|jpe?g|gif|avif)$/i;

/** @param {string} encoded */
const withoutExtension = (encoded) => encoded.replace(EXTENSION, '');

/**
 * GET /p/<base58(url)>: a remote (or own) image, resized and encoded: the variant and the headers of its 200.
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
 * GET and HEAD /p/<base58(url)>[/<filename>], in every spelling, on the plain `http` request (lib's plainRoute:
 * one writer of the variant, the 304 and the JSON error, with the request id, metric and log line). A
 * conditional request is answered 304 before any byte is read; a range of a variant in the result cache is
 * sent from its file by `send` (Express's own); any other answer is the variant's whole bytes.
 * @param {ProxyDeps & { observe: (route: string, status: number, started: number) => void, logger: import('pino').Logger }} deps
 * @returns {(req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse) => boolean}
 */
export function proxyHandler(deps) {
  const answer = proxyAnswer(deps);
  const { observe, logger, metrics, config, images } = deps;
  const shape = { prefix: '/p/', min: 1, max: 2, route: () => 'proxy' };
  return plainRoute(
    {
      observe,
      logger,
      errorCacheControl: config.CACHE_CONTROL_NEGATIVE,
      rejected: (err) => metrics.rejections.inc({ reason: /** @type {any} */ (err).name || 'error' }),
    },
    shape,
    async ({ segments: [encoded], search }, reply, req, res) => {
      const query = querystring.parse(search);
      const respond = async (retried = false) => {
        const { headers, variant } = await answer(encoded, proxyRequest(req, query));
        if (fresh(req.headers, { etag: headers.ETag })) {
          const { 'Content-Type': _type, ...unchanged } = headers;
          return reply.send(304, unchanged);
        }
        if (req.method === 'HEAD') {
          reply.send(200, { ...headers, 'Content-Length': bytesOf(variant) });
          return countSent(metrics, variant);
        }
        if (variant.cached && req.headers.range) return sendRange(variant, headers, retried);
        let data = variant.data;
        try {
          if (variant.cached) data = await images.readCached(variant.cached);
        } catch (err) {
          if (forgetIfMissing(deps, err, variant, retried, res)) return respond(true);
          throw err;
        }
        reply.send(200, headers, data);
        countSent(metrics, variant);
      };
      /** @param {import('../images.js').Variant} variant @param {Record<string, string>} headers @param {boolean} retried */
      const sendRange = (variant, headers, retried) => {
        const { file, start, end } = images.cachedFile(
          /** @type {import('../cache/pack-cache.js').PackEntry} */ (variant.cached),
        );
        for (const [name, value] of Object.entries({ ...headers, 'X-Request-Id': reply.reqId }))
          res.setHeader(name, value);
        const sent = () => {
          countSent(metrics, variant);
          reply.done(res.statusCode);
        };
        res.once('finish', sent);
        send(req, encodeURI(file), { ...SEND_OPTIONS, start, end })
          .on('error', (/** @type {unknown} */ err) => {
            // nothing was sent: the variant's headers go, the answer is made again or is the error. Only our
            // own listener leaves: the server's own on 'finish' reads the connection's next request (all of
            // them removed, a 416 left its keep-alive connection answering nothing more)
            if (!res.headersSent) for (const name of res.getHeaderNames()) res.removeHeader(name);
            res.off('finish', sent);
            if (!forgetIfMissing(deps, err, variant, retried, res)) return reply.fail(err);
            respond(true).catch(reply.fail);
          })
          .pipe(res);
      };
      await respond();
    },
  );
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

/**
 * What a request asks.
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
