import { HttpError } from '@stack/lib';
import { isKey } from '../keys.js';
import { sniffFile } from '../sniff.js';

/**
 * GET /<key>/<filename?>: an uploaded original, streamed from the store; the filename is ignored.
 * Content-addressed, so the key is a strong ETag and the answer never changes.
 * @param {{ store: import('../store/fs.js').FsStore, config: Record<string, any> }} deps
 * @returns {import('express').RequestHandler}
 */
export function serveRoute({ store, config }) {
  return async (req, res, next) => {
    res.locals.route = 'original';
    try {
      const key = req.params.key;
      const found = isKey(key) ? await store.stat(key) : null;
      if (!found) throw new HttpError(404, 'not_found', { key: key.slice(0, 100) });
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
