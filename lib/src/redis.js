import { Redis } from 'ioredis';

/**
 * A Redis client that fails fast while Redis is down (no offline queue), so callers can degrade
 * instead of hanging; it reconnects by itself.
 * @param {string} url
 * @param {import('pino').Logger} logger
 */
export function connectRedis(url, logger) {
  const redis = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2000,
    retryStrategy: (times) => Math.min(times * 100, 2000),
  });
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
