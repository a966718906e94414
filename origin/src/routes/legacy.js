import { HttpError, base58Url } from '@stack/lib';
import { mendScheme } from '../images.js';

/**
 * GET /<W>x<H>/<url>: the old images.hive.blog form, answered with a permanent redirect to /p/.
 * @param {{ config: Record<string, any> }} deps
 * @returns {import('express').RequestHandler}
 */
export function legacyRoute({ config }) {
  return (req, res, next) => {
    res.locals.route = 'legacy';
    const [width, height] = req.params.size.split('x').map(Number);
    const target = mendScheme(req.originalUrl.slice(req.params.size.length + 2));
    let url;
    try {
      url = new URL(target);
    } catch {
      return next(new HttpError(400, 'invalid_url', { reason: 'not an absolute URL' }));
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return next(new HttpError(400, 'invalid_url', { reason: 'only http and https' }));
    const query = new URLSearchParams({ format: 'match', mode: 'fit' });
    if (width) query.set('width', String(Math.min(width, config.MAX_DIMENSION)));
    if (height) query.set('height', String(Math.min(height, config.MAX_DIMENSION)));
    res.set('Cache-Control', config.CACHE_CONTROL_IMMUTABLE);
    return res.redirect(301, `/p/${base58Url.encode(url.toString())}?${query}`);
  };
}
