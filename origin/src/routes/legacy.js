import { base58Url, mendScheme } from '@stack/lib';
import { canonicalSize } from '../options.js';
import { isPreviewToken } from './proxy-auth.js';
import { publicPaths } from './proxy.js';

// the editor-preview token a frontend appends to a proxied URL (POST /proxy-auth answers 48 hex digits) is
// ours, not the source's; another `token` (a Firebase download token, a signed URL's) is the source's own
const PREVIEW_TOKEN = /([?&])token=[0-9a-f]{48}(&|$)/;

/**
 * The source URL in a legacy path, as images.hive.blog reads it (src/legacy-proxy.ts): the scheme mended
 * where a proxy merged its "//", the old steemit.com IPFS gateway moved to ipfs.io, our preview token left out.
 * @param {string} tail what follows /<W>x<H>/
 */
export function legacySource(tail) {
  return mendScheme(tail)
    .replace('steemit.com/ipfs/', 'ipfs.io/ipfs/')
    .replace(PREVIEW_TOKEN, (_match, separator, next) => (next ? separator : ''));
}

/**
 * The preview token of a legacy URL: varnish hands it over as X-Preview-Token (it keeps it out of its key),
 * a request straight to the origin has it in the URL. @param {import('express').Request} req
 */
function previewToken(req) {
  const given = req.headers['x-preview-token'];
  if (isPreviewToken(given)) return /** @type {string} */ (given);
  return /[?&]token=([0-9a-f]{48})(?:&|$)/.exec(req.originalUrl)?.[1] ?? '';
}

/**
 * GET /<W>x<H>/<url>: the old images.hive.blog form, answered with a permanent redirect to /p/ (tagged with
 * the source's xkey, so a takedown evicts it), or the source's 451.
 * @param {{ config: import('@stack/lib/src/config-types.js').OriginConfig, images: ReturnType<typeof import('../images.js').createImages>,
 *   guard: import('../takedown.js').Guard }} deps
 * @returns {import('express').RequestHandler}
 */
export function legacyRoute({ config, images, guard }) {
  return async (req, res, next) => {
    res.locals.route = 'legacy';
    try {
      const size = String(/** @type {Record<string, string>} */ (req.params)[0]);
      const [width, height] = size.split('x').map(Number);
      const target = legacySource(req.originalUrl.slice(size.length + 2));
      const source = images.resolveSource(target);
      // remembered only for a source served already: a redirect costs its asker nothing
      guard.served(source, publicPaths(req), true);
      await guard.check(source);
      const query = new URLSearchParams({ format: 'match', mode: 'fit' });
      if (width) query.set('width', String(canonicalSize(width, config)));
      if (height) query.set('height', String(canonicalSize(height, config)));
      res.set({ 'Cache-Control': config.CACHE_CONTROL_IMMUTABLE, xkey: `img:${source.id}` });
      // under the proxy whitelist, the editor's preview token goes on to /p/ (condenser appends it to the
      // legacy URL: ProxifyUrl.js proxifyImageUrl's token); such a redirect is its holder's alone and temporary
      const token = config.PROXY_WHITELIST !== 'off' && previewToken(req);
      if (token) {
        query.set('token', token);
        res.set('Cache-Control', 'private, no-store');
      }
      // a token's redirect is temporary (the token expires in half an hour): no browser keeps it
      res.redirect(token ? 302 : 301, `/p/${base58Url.encode(new URL(target).toString())}?${query}`);
    } catch (err) {
      next(err);
    }
  };
}
