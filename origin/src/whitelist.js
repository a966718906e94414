// Which remote images /p/ proxies (PROXY_WHITELIST), as images.hive.blog decides it (its src/whitelist.ts,
// allowlist.ts, proxy.ts): with `chain`, those a post or comment on the Hive chain references (recorded by the
// chain follower: lib/src/whitelist.js); with `haf`, those a HAF proxy-whitelist service vouches for. Our own
// uploads, PROXY_WHITELIST_HOSTS and a valid preview token (POST /proxy-auth: condenser's editor shows an image
// before it is posted) pass; anything else is a 403 that no cache keeps, so the URL is served the moment a
// block references it. A check that fails lets the image through (counted): the whitelist keeps the host from
// being a free proxy, it must not take the images of the posts down with it.
import { HttpError, WHITELIST_KEY, jsonWithin } from '@stack/lib';
import { LRUCache } from 'lru-cache';
import { request } from 'undici';
import { isPreviewToken, previewTokenKey } from './routes/proxy-auth.js';

/** images.hive.blog's answer to a URL no post references: refused, and kept by no cache. */
const NOT_WHITELISTED = () =>
  new HttpError(
    403,
    'not_whitelisted',
    { reason: 'this image is not referenced on the chain' },
    { 'Cache-Control': 'no-store' },
  );
/** images.hive.blog's answer to a URL the HAF service has blacklisted. */
const BLACKLISTED = () =>
  new HttpError(
    451,
    'unavailable_for_legal_reasons',
    { reason: 'blacklisted' },
    { 'Cache-Control': 'public, max-age=86400' },
  );

/**
 * @typedef {{ private: boolean }} Access private: let through by a preview token, so answered `private, no-store`
 * @typedef {{ check: (source: import('@stack/lib/src/sources.js').Source, token: unknown) => Promise<Access> }} Whitelist
 */

/**
 * @param {{ config: import('@stack/lib/src/config-types.js').OriginConfig, redis: import('ioredis').Redis,
 *   metrics: import('./metrics.js').OriginMetrics, logger: import('pino').Logger }} deps
 * @returns {Whitelist}
 */
export function createWhitelist({ config, redis, metrics, logger }) {
  const open = { private: false };
  if (config.PROXY_WHITELIST === 'off') return { check: async () => open };
  const hosts = new Set(config.PROXY_WHITELIST_HOSTS.map((host) => host.toLowerCase()));
  const listed = config.PROXY_WHITELIST === 'haf' ? hafService(config) : chainList(redis);
  const count = (/** @type {string} */ result) => metrics.whitelist.inc({ result });

  return {
    async check(source, token) {
      if (source.uploadKey || !source.url) return open;
      if (hosts.has(new URL(source.url).hostname.toLowerCase())) {
        count('allowed_host');
        return open;
      }
      if (await previewAccount(redis, token)) {
        count('preview_token');
        return { private: true };
      }
      let status;
      try {
        status = await listed(source);
      } catch (err) {
        count('failed_open');
        logger.warn(
          { err: /** @type {Error} */ (err).message, url: source.url },
          'whitelist check failed: let through',
        );
        return open;
      }
      count(status);
      if (status === 'unknown') throw NOT_WHITELISTED();
      if (status === 'blacklisted') throw BLACKLISTED();
      return open;
    },
  };
}

/**
 * The account a preview token was issued to, or null (no token, a malformed one, expired; Redis away: no
 * bypass, the whitelist decides). @param {import('ioredis').Redis} redis @param {unknown} token
 */
async function previewAccount(redis, token) {
  const text = Array.isArray(token) ? token[0] : token;
  if (!isPreviewToken(text)) return null;
  return redis.get(previewTokenKey(text)).catch(() => null);
}

/**
 * The chain's list in Redis, which the follower fills. @param {import('ioredis').Redis} redis
 * @returns {(source: import('@stack/lib/src/sources.js').Source) => Promise<'listed' | 'unknown'>}
 */
function chainList(redis) {
  return async (source) => ((await redis.hexists(WHITELIST_KEY, source.id)) ? 'listed' : 'unknown');
}

/**
 * A HAF proxy-whitelist service (PostgREST): POST /whitelist/check {"url"} answers "whitelisted", "unknown" or
 * "blacklisted" (images.hive.blog's src/whitelist.ts checkUrl). A URL once whitelisted is remembered for an
 * hour, a blacklisted one for ten minutes; an unknown one is asked again (a block may reference it next).
 * @param {import('@stack/lib/src/config-types.js').OriginConfig} config
 * @returns {(source: import('@stack/lib/src/sources.js').Source) => Promise<'listed' | 'unknown' | 'blacklisted'>}
 */
function hafService(config) {
  /** @type {LRUCache<string, 'listed' | 'blacklisted'>} */
  const known = new LRUCache({ max: 100_000, ttl: 3_600_000 });
  const endpoint = `${config.PROXY_WHITELIST_URL}/whitelist/check`;
  return async (source) => {
    const remembered = known.get(source.id);
    if (remembered) return remembered;
    const response = await request(endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ url: source.url }),
      headersTimeout: config.PROXY_WHITELIST_TIMEOUT_MS,
      bodyTimeout: config.PROXY_WHITELIST_TIMEOUT_MS,
      signal: AbortSignal.timeout(config.PROXY_WHITELIST_TIMEOUT_MS),
    });
    if (response.statusCode !== 200) {
      await response.body.dump();
      throw new Error(`whitelist service answered ${response.statusCode}`);
    }
    const answer = await jsonWithin(response.body, 64 * 1024, 'the whitelist service');
    if (answer === 'unknown') return 'unknown';
    const status = answer === 'blacklisted' ? 'blacklisted' : 'listed';
    known.set(source.id, status, status === 'blacklisted' ? { ttl: 600_000 } : {});
    return status;
  };
}
