import { HttpError, isUploadKey, paramsOf } from '@stack/lib';
import { sniffFile } from '../sniff.js';
import { contentTypeOf } from '../pipeline/index.js';
import { publicPaths } from './proxy.js';
import { SEND_OPTIONS } from './send.js';

/** Whether a client says it shows HEIC (Safari does; no other browser). @param {string | undefined} accept */
const acceptsHeic = (accept) => /image\/hei[cf]/i.test(accept || '');

/**
 * GET /<key>/<filename?>: an uploaded original, streamed from the store (or pulled through from an upstream
 * image host first: UPSTREAM_IMAGE_HOSTS); the filename is ignored.
 * Content-addressed, so the key is a strong ETag and the answer never changes (but for a takedown: 451).
 * An original HEIC is served as it is to a client whose Accept names HEIC, and as a JPEG of its size to the
 * rest (no browser but Safari shows HEIC), with Vary: Accept.
 * @param {{ config: import('@stack/lib/src/config-types.js').OriginConfig, guard: import('../takedown.js').Guard,
 *   images: ReturnType<typeof import('../images.js').createImages> }} deps
 * @returns {import('express').RequestHandler}
 */
export function serveRoute({ config, guard, images }) {
  return async (req, res, next) => {
    res.locals.route = 'original';
    try {
      const key = paramsOf(req).key;
      if (!isUploadKey(key)) throw new HttpError(404, 'not_found', { key: key.slice(0, 100) });
      const source = { id: key, uploadKey: key };
      // a taken-down key is refused before any work: never pulled from an upstream image host
      await guard.check(source);
      const found = await images.upload(key);
      guard.served(source, publicPaths(req));
      // which upstream image host this request's pull fetched it from (the backfill command counts these)
      if (found.pulledFrom) res.set('X-Pulled-From', found.pulledFrom);
      const type = await sniffFile(found.path);
      if (type === 'image/heic') {
        res.set('Vary', 'Accept');
        if (!acceptsHeic(req.headers.accept)) {
          await asJpeg(res, images, config, source);
          return;
        }
      }
      res.set({
        'Content-Type': type,
        'Cache-Control': config.CACHE_CONTROL_IMMUTABLE,
        ETag: `"${key}"`,
        xkey: `img:${key}`,
        'X-Content-Type-Options': 'nosniff',
        'Content-Security-Policy': "default-src 'none'; sandbox",
      });
      // the store's own path (its run root is `.run`): Express 5's send ignores a path with a dot-directory
      res.sendFile(found.path, SEND_OPTIONS, (err) => err && next(err));
    } catch (err) {
      next(err);
    }
  };
}

/**
 * The original, every pixel of it (within MAX_DIMENSION), as a JPEG: a variant of its own size.
 * @param {import('express').Response} res @param {ReturnType<typeof import('../images.js').createImages>} images
 * @param {import('@stack/lib/src/config-types.js').OriginConfig} config @param {import('@stack/lib/src/sources.js').Source} source
 */
async function asJpeg(res, images, config, source) {
  const variant = await images.variant(source, {
    width: config.MAX_DIMENSION,
    height: config.MAX_DIMENSION,
    mode: 'fit',
    format: 'jpeg',
    accept: '',
  });
  res.set({
    'Content-Type': contentTypeOf(variant.format),
    'Cache-Control': config.CACHE_CONTROL_IMMUTABLE,
    ETag: `"${source.id}-jpeg"`,
    xkey: `img:${source.id}`,
    'X-Content-Type-Options': 'nosniff',
  });
  res.send(variant.cached ? await images.readCached(variant.cached) : variant.data);
}
