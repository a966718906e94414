import { HttpError } from '@stack/lib';

/**
 * Failures remembered in Redis with a TTL, so a broken source is not retried in a tight loop:
 * permanent ones (not found, not an image) long, transient ones (timeouts, 5xx) short.
 * Redis being down only means nothing is remembered: images keep serving.
 */
export class FailureCache {
  /** @param {import('ioredis').Redis} redis @param {{ permanentTtl: number, transientTtl: number }} ttl */
  constructor(redis, ttl) {
    this.redis = redis;
    this.ttl = ttl;
  }

  /** @param {string} id @returns {Promise<HttpError | null>} */
  async get(id) {
    let stored = null;
    try {
      stored = await this.redis.get(`origin:fail:${id}`);
    } catch {
      return null;
    }
    if (!stored) return null;
    const { status, name, info } = JSON.parse(stored);
    return new HttpError(status, name, { ...info, cached: true });
  }

  /** @param {string} id @param {HttpError} err @param {boolean} permanent @param {number} [seconds] a lifetime of its own */
  async set(id, err, permanent, seconds) {
    const ttl = seconds ?? (permanent ? this.ttl.permanentTtl : this.ttl.transientTtl);
    if (ttl <= 0) return;
    const value = JSON.stringify({ status: err.status, name: err.name, info: err.info });
    await this.redis.set(`origin:fail:${id}`, value, 'EX', ttl).catch(() => {});
  }
}
