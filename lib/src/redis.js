import { Redis } from 'ioredis';

/**
 * Where Redis is: REDIS_URL's server, or with REDIS_SENTINELS the master the sentinels name (REDIS_URL then
 * gives the database). The user and password: REDIS_USERNAME and REDIS_PASSWORD, else REDIS_URL's; the
 * sentinels ask for the same ones.
 * @param {Record<string, any>} config REDIS_URL, REDIS_USERNAME, REDIS_PASSWORD, REDIS_SENTINELS, REDIS_MASTER_NAME
 * @returns {[string, import('ioredis').RedisOptions]}
 */
export function redisTarget(config) {
  const url = new URL(config.REDIS_URL);
  const password = config.REDIS_PASSWORD || decodeURIComponent(url.password) || undefined;
  const username = config.REDIS_USERNAME || decodeURIComponent(url.username) || undefined;
  if (!config.REDIS_SENTINELS?.length) {
    // the user and password as options: ioredis would let those in the URL win over them
    url.password = '';
    url.username = '';
    return [url.href, { ...(password ? { password } : {}), ...(username ? { username } : {}) }];
  }
  const sentinels = config.REDIS_SENTINELS.map((address) => {
    const at = address.lastIndexOf(':');
    return { host: address.slice(0, at).replace(/^\[|\]$/g, ''), port: Number(address.slice(at + 1)) };
  });
  return [
    '',
    {
      sentinels,
      name: config.REDIS_MASTER_NAME || 'mymaster',
      db: Number(url.pathname.slice(1) || 0),
      password,
      username,
      // the sentinels know the services' users too (infra/secrets.js)
      sentinelPassword: password,
      sentinelUsername: username,
      // a failover: the master now answers READONLY until the client asks the sentinels again
      reconnectOnError: (err) => err.message.startsWith('READONLY'),
    },
  ];
}

/**
 * A Redis client that fails fast while Redis is down (no offline queue) or stalled (a command's timeout), so
 * callers can degrade instead of hanging; it reconnects by itself, to the new master after a Sentinel failover.
 * @param {Record<string, any>} config REDIS_URL, REDIS_SENTINELS, REDIS_MASTER_NAME
 * @param {import('pino').Logger} logger
 */
export function connectRedis(config, logger) {
  const [url, target] = redisTarget(config);
  const options = {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2000,
    // Redis that stops answering without going away (stopped, a network dropping packets: the connection looks
    // alive for minutes) fails a command as Redis down does, so its caller degrades instead of hanging; past
    // the longest wait a command asks for (blocking stream reads: 1 s; WAIT: REDIS_ACK_TIMEOUT_MS)
    commandTimeout: Math.max(2000, (config.REDIS_ACK_TIMEOUT_MS || 1000) + 1000),
    retryStrategy: (/** @type {number} */ times) => Math.min(times * 100, 2000),
    ...target,
  };
  const redis = url ? new Redis(url, options) : new Redis(options);
  let lastError = '';
  redis.on('error', (err) => {
    if (err.message !== lastError) logger.warn({ err: err.message }, 'redis error');
    lastError = err.message;
  });
  redis.on('ready', () => {
    lastError = '';
    logger.info('redis ready');
  });
  return redis;
}

/** Resolves once the client is ready, or after `ms` (services start even when Redis is late). @param {Redis} redis @param {number} ms */
export function redisReady(redis, ms) {
  if (redis.status === 'ready') return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    redis.once('ready', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

/**
 * Waits until `replicas` replicas hold every write this client made (WAIT), so what is acknowledged next
 * survives a failover to one of them; throws when fewer confirm within `timeoutMs`. No-op at 0.
 * @param {Redis} redis @param {{ REDIS_ACK_REPLICAS?: number, REDIS_ACK_TIMEOUT_MS?: number }} config
 */
export async function awaitReplicas(redis, config) {
  const replicas = config.REDIS_ACK_REPLICAS || 0;
  if (!replicas) return;
  const held = Number(await redis.wait(replicas, config.REDIS_ACK_TIMEOUT_MS || 1000));
  if (held < replicas) throw new Error(`held by ${held} of ${replicas} replicas`);
}
