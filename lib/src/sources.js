import { createHash } from 'node:crypto';
import { HttpError } from './errors.js';
import { base58Url } from './base58-url.js';

// Base58 alphabet, long enough to be an upload key: anything else (dots, slashes, percent) is not a key.
const KEY = /^[1-9A-HJ-NP-Za-km-z]{20,100}$/;

/** @param {string} text */
export function isUploadKey(text) {
  return KEY.test(text);
}

/** @param {string} text */
export function sha256Hex(text) {
  return createHash('sha256').update(text).digest('hex');
}

/** @param {string} text a scheme whose `//` a proxy merged into `/` is mended */
export function mendScheme(text) {
  return text.replace(/^(https?):\/+/i, '$1://');
}

/** The URL inside a legacy `/<W>x<H>/<url>` path (proxies merge `//` into `/`, so mend the scheme). @param {URL} url */
function legacyInner(url) {
  const match = /^\/\d+x\d+\/(.+)$/.exec(url.pathname + url.search);
  return match ? mendScheme(match[1]) : null;
}

/**
 * @typedef {{ ownHost: string, unwrapHosts: Set<string>, uploadHosts?: Set<string> }} UnwrapOptions
 *   uploadHosts: the hosts (host:port) of UPSTREAM_IMAGE_HOSTS, whose /<key>/<name> URLs name our uploads too
 * @typedef {{ id: string, url?: string, uploadKey?: string }} Source
 *   what an image URL really names: an upload of ours (`uploadKey`) or a remote original (`url`); `id` is the
 *   upload key or sha256 of the URL, and every answer for it carries the xkey `img:<id>`
 */

/** @param {Record<string, any>} config PUBLIC_URL, UNWRAP_HOSTS, UPSTREAM_IMAGE_HOSTS @returns {UnwrapOptions} */
export function unwrapOptions(config) {
  const uploadHosts = new Set(
    (config.UPSTREAM_IMAGE_HOSTS || []).map((/** @type {string} */ base) => new URL(base).host),
  );
  return { ownHost: new URL(config.PUBLIC_URL).host, unwrapHosts: new Set(config.UNWRAP_HOSTS), uploadHosts };
}

/**
 * Where an image URL really points: our own upload, or the original behind our own or another image
 * proxy's `/p/` or `/<W>x<H>/` URL (unwrapped up to four deep). A JSON 400 for what is not an http(s) URL.
 * @param {string} text @param {UnwrapOptions} options @param {number} [depth] @returns {Source}
 */
export function resolveSource(text, options, depth = 0) {
  let url;
  try {
    url = new URL(text);
  } catch {
    throw new HttpError(400, 'invalid_url', { reason: 'not an absolute URL' });
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new HttpError(400, 'invalid_url', { reason: 'only http and https' });
  // an upstream image host's uploads are ours: pulled through on first request (UPSTREAM_IMAGE_HOSTS)
  const own = url.host === options.ownHost || Boolean(options.uploadHosts?.has(url.host));
  if (depth < 4 && (own || options.unwrapHosts.has(url.hostname))) {
    const proxied = /^\/p\/([1-9A-HJ-NP-Za-km-z]+)/.exec(url.pathname);
    const inner = proxied ? base58Url.decode(proxied[1]) : legacyInner(url);
    if (inner) return resolveSource(inner, options, depth + 1);
    const key = url.pathname.split('/')[1] || '';
    if (own && isUploadKey(key)) return { id: key, uploadKey: key };
  }
  return { id: sha256Hex(url.toString()), url: url.toString() };
}
