import { LRUCache } from 'lru-cache';
import { avatarCacheKey, avatarLastKey } from '@stack/lib';
import { Breaker } from './breaker.js';
import { createBatcher } from './batcher.js';

/**
 * @typedef {import('@stack/lib/src/hive-profile.js').Mapping} Mapping
 * @typedef {'memory'|'redis'|'upstream'|'stale'|'default'} LookupSource
 * @typedef {{ mapping: Mapping | null, source: LookupSource }} Lookup  mapping null: no such account
 * @typedef {{ name: string, fetchMany: (names: string[]) => Promise<Map<string, Mapping>> }} Source
 */

const NONE = /** @type {const} */ ('none');

/**
 * Resolves accounts to image URLs: in-process LRU → Redis cache → the source (batched, single-flight,
 * behind a breaker); when the source fails, the last known mapping, else no mapping (default image).
 * @param {{ source: Source, redis: import('ioredis').Redis, config: import('@stack/lib/src/config-types.js').AvatarResolverConfig,
 *   metrics: ReturnType<typeof import('./metrics.js').createResolverMetrics> }} deps
 */
export function createResolver({ source, redis, config, metrics }) {
  /** @type {LRUCache<string, Mapping | typeof NONE>} */
  const memory = new LRUCache({ max: Math.max(1, config.AVATAR_MEMORY_ENTRIES), ttl: config.AVATAR_MEMORY_TTL_MS });
  const cacheInRedis = source.name !== 'local';
  const breaker = new Breaker({
    failures: config.AVATAR_BREAKER_FAILURES,
    cooldownMs: config.AVATAR_BREAKER_COOLDOWN_MS,
    onState: (state) => metrics.breakerState.set(state),
  });
  const load = createBatcher({
    waitMs: config.AVATAR_BATCH_WAIT_MS,
    maxBatch: config.AVATAR_BATCH_MAX,
    load: (names) => breaker.run(() => callSource(names)),
  });

  /** @param {string[]} names */
  async function callSource(names) {
    metrics.batchSize.observe(names.length);
    metrics.upstreamCalls.inc();
    const end = metrics.upstreamDuration.startTimer();
    try {
      const found = await withTimeout(source.fetchMany(names), config.AVATAR_UPSTREAM_TIMEOUT_MS);
      end({ outcome: 'ok' });
      return found;
    } catch (err) {
      end({ outcome: 'error' });
      metrics.upstreamErrors.inc();
      throw err;
    }
  }

  /** @param {string} account @returns {Promise<Mapping | typeof NONE | null>} null: not cached */
  async function fromRedis(account) {
    if (!cacheInRedis) return null;
    const text = await redis.get(avatarCacheKey(account)).catch(() => null);
    if (text === null) return null;
    return text === NONE ? NONE : JSON.parse(text);
  }

  /** @param {string} account @param {Mapping | undefined} mapping */
  async function remember(account, mapping) {
    memory.set(account, mapping || NONE);
    if (!cacheInRedis) return;
    const multi = redis.multi();
    if (mapping) {
      multi.set(avatarCacheKey(account), JSON.stringify(mapping), 'EX', config.AVATAR_CACHE_TTL_S);
      multi.set(avatarLastKey(account), JSON.stringify(mapping), 'EX', 30 * 86400);
    } else if (config.AVATAR_NEGATIVE_TTL_S > 0) {
      multi.set(avatarCacheKey(account), NONE, 'EX', config.AVATAR_NEGATIVE_TTL_S);
    }
    await multi.exec().catch(() => {});
  }

  /** @param {string} account @returns {Promise<Lookup>} */
  async function resolve(account) {
    const inMemory = memory.get(account);
    if (inMemory !== undefined) return counted({ mapping: inMemory === NONE ? null : inMemory, source: 'memory' });
    const cached = await fromRedis(account);
    if (cached !== null) {
      memory.set(account, cached);
      return counted({ mapping: cached === NONE ? null : cached, source: 'redis' });
    }
    // a lookup for the same account may have finished while Redis answered: no second upstream call
    const landed = memory.get(account);
    if (landed !== undefined) return counted({ mapping: landed === NONE ? null : landed, source: 'memory' });
    try {
      const mapping = await load(account);
      await remember(account, mapping);
      return counted({ mapping: mapping || null, source: 'upstream' });
    } catch {
      const last = cacheInRedis ? await redis.get(avatarLastKey(account)).catch(() => null) : null;
      if (last) return counted({ mapping: JSON.parse(last), source: 'stale' });
      return counted({ mapping: { avatar: null, cover: null }, source: 'default' });
    }
  }

  /** @param {Lookup} lookup */
  function counted(lookup) {
    metrics.lookups.inc({ source: lookup.source });
    return lookup;
  }

  return { resolve, forget: (/** @type {string} */ account) => memory.delete(account), breaker };
}

/** @template T @param {Promise<T>} promise @param {number} ms @returns {Promise<T>} */
function withTimeout(promise, ms) {
  /** @type {NodeJS.Timeout | undefined} */
  let timer;
  const timeout = new Promise((_resolve, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error('upstream timeout'), { code: 'ETIMEDOUT' })), ms);
  });
  return /** @type {Promise<T>} */ (Promise.race([promise, timeout]).finally(() => clearTimeout(timer)));
}
