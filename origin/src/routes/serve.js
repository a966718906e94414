import { HttpError, isUploadKey } from '@stack/lib';
import { sniffFile } from '../sniff.js';
import { publicPaths } from './proxy.js';

/**
 * GET /<key>/<filename?>: an uploaded original, streamed from the store; the filename is ignored.
 * Content-addressed, so the key is a strong ETag and the answer never changes (but for a takedown: 451).
 * @param {{ store: import('../store/index.js').Store, config: Record<string, any>, guard: import('../takedown.js').Guard }} deps
 * @returns {import('express').RequestHandler}
 */
export function serveRoute({ store, config, guard }) {
  return async (req, res, next) => {
    res.locals.route = 'original';
    try {
      const key = req.params.key;
      const found = isUploadKey(key) ? await store.stat(key) : null;
      if (!found) throw new HttpError(404, 'not_found', { key: key.slice(0, 100) });
      const source = { id: key, uploadKey: key };
      guard.served(source, publicPaths(req));
      await guard.check(source);
      res.set({
        'Content-Type': await sniffFile(found.path),
        'Cache-Control': config.CACHE_CONTROL_IMMUTABLE,
        ETag: `"${key}"`,
        xkey: `img:${key}`,
        'X-Content-Type-Options': 'nosniff',
        'Content-Security-Policy': "default-src 'none'; sandbox",
      });
      res.sendFile(found.path, { etag: false, lastModified: false, cacheControl: false }, (err) => err && next(err));
    } catch (err) {
      next(err);
    }
  };
}
