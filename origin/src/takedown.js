import querystring from 'node:querystring';
import { TAKEDOWN_EVICT_CHANNEL, TAKEDOWN_KEYS, createServedLog, subscribe, takedownError } from '@stack/lib';
import { parseWant } from './options.js';

/**
 * The origin's side of takedowns: refuse what is blocked (451), remember what was served where.
 * @param {{ takedowns: import('@stack/lib/src/takedowns.js').TakedownList, redis: import('ioredis').Redis, config: import('@stack/lib/src/config-types.js').OriginConfig,
 *   logger: import('pino').Logger }} deps
 */
export function createGuard({ takedowns, redis, config, logger }) {
  const log = createServedLog({
    redis,
    logger,
    max: config.SERVED_SOURCES_MAX,
    perSource: config.SERVED_PATHS_PER_SOURCE,
  });

  /** @param {string} key @returns {Promise<import('@stack/lib/src/takedowns.js').TakedownEntry | null>} */
  async function uploaderBlocked(key) {
    const list = takedowns.current;
    if (!list.accounts) return null;
    const account = await redis.hget(TAKEDOWN_KEYS.owners, key).catch(() => null);
    return account ? list.account(account) : null;
  }

  return {
    /**
     * Throws the 451 (tagged `img:<id>`, so an unblock's purge evicts it) when the source, or the account
     * that uploaded it, is taken down. Asked before any work and again before an answer leaves.
     * @param {import('@stack/lib/src/sources.js').Source} source
     */
    async check(source) {
      const hit =
        takedowns.current.source(source) || (source.uploadKey ? await uploaderBlocked(source.uploadKey) : null);
      if (hit) throw takedownError(config.CACHE_CONTROL_TAKEDOWN, { xkey: `img:${source.id}` });
    },
    /** A new upload's entry in the list (its key, or its uploader's account). @param {string} key @param {string | null} account */
    blockedUpload(key, account) {
      const list = takedowns.current;
      return list.source({ uploadKey: key }) || (account ? list.account(account) : null);
    },
    served: log.served,
  };
}
/** @typedef {ReturnType<typeof createGuard>} Guard */

/**
 * What a served path asked for, in each of the three Accept classes a negotiated answer has: the variants
 * to drop. Anything but a /p/ path (an original, a legacy redirect) has none. @param {string} path
 * @param {import('@stack/lib/src/config-types.js').OriginConfig} config
 */
function wantsOf(path, config) {
  const match = /^\/p\/[^?]*(?:\?(.*))?$/.exec(path);
  if (!match) return [];
  try {
    const query = querystring.parse(match[1] || '');
    return ['', 'image/webp', 'image/avif'].map((accept) => parseWant(query, accept, config));
  } catch {
    return [];
  }
}

/**
 * Drops the sources a takedown names (purge service, by Redis pub/sub) from this origin's result cache and
 * originals cache, and with TAKEDOWN_DELETE_UPLOADS deletes the stored upload too; uploads whose stored bytes
 * changed (`changed`: scrubbed by scrub-store) are dropped from the caches only.
 * @param {{ redis: import('ioredis').Redis, images: ReturnType<typeof import('./images.js').createImages>,
 *   store: import('./store/index.js').Store, config: import('@stack/lib/src/config-types.js').OriginConfig, logger: import('pino').Logger }} deps
 */
export function listenForEvictions({ redis, images, store, config, logger }) {
  const subscriber = subscribe(redis, TAKEDOWN_EVICT_CHANNEL, async (message) => {
    try {
      const { sources, changed = [] } = JSON.parse(message);
      for (const [id, paths] of Object.entries(/** @type {Record<string, string[]>} */ (sources))) {
        const uploadKey = /^[0-9a-f]{64}$/.test(id) ? undefined : id;
        await images.dropSource(
          { id, uploadKey },
          paths.flatMap((path) => wantsOf(path, config)),
        );
        // an upload whose stored bytes changed (scrub-store) is dropped from the caches, never deleted
        if (uploadKey && config.TAKEDOWN_DELETE_UPLOADS && !changed.includes(uploadKey)) await store.remove(uploadKey);
      }
      logger.info({ sources: Object.keys(sources).length }, 'taken-down sources dropped from the caches');
    } catch (err) {
      logger.warn({ err: /** @type {Error} */ (err).message }, 'takedown eviction failed');
    }
  });
  return { close: () => subscriber.disconnect() };
}
