// Why an image is not warmed now: the operator's skipped domains, the day's bytes, warmed already today, the
// rates (per author an hour, all authors a minute). Counts against the rates only what passes.
import { createHash } from 'node:crypto';
import { warmBytesKey } from '@stack/lib';

/** @param {string} host @param {string[]} domains */
const inDomains = (host, domains) => domains.some((domain) => host === domain || host.endsWith(`.${domain}`));

/**
 * The reason `url` of `author` is not warmed now, '' to warm it.
 * @param {import('ioredis').Redis} redis @param {import('@stack/lib/src/config-types.js').PurgeServiceConfig} config
 * @param {string} author @param {string} url
 */
export async function warmRefusal(redis, config, author, url) {
  let host = '';
  try {
    host = new URL(url).hostname.toLowerCase();
  } catch {
    return 'invalid_url';
  }
  if (inDomains(host, config.WARM_SKIP_DOMAINS)) return 'domain';
  if (Number(await redis.get(warmBytesKey())) >= config.WARM_MAX_BYTES_PER_DAY) return 'bytes_cap';
  const seen = await redis.set(`warm:seen:${createHash('sha256').update(url).digest('hex')}`, '1', 'EX', 86_400, 'NX');
  if (!seen) return 'seen';
  if (await overAuthorRate(redis, author, config.WARM_AUTHOR_IMAGES_PER_HOUR)) return 'author_rate';
  if (await overRate(redis, url, config.WARM_IMAGES_PER_MINUTE)) return 'rate';
  return '';
}

/** Counts one image of `author` this hour: whether that is past its limit. @param {import('ioredis').Redis} redis @param {string} author @param {number} limit */
async function overAuthorRate(redis, author, limit) {
  const key = `warm:author:${author}:${Math.floor(Date.now() / 3_600_000)}`;
  const counted = await redis.multi().incr(key).expire(key, 3600).exec();
  return Number(counted?.[0]?.[1]) > limit;
}

/**
 * Every author together: at most `limit` images in any 60 s (a sliding window); counts `url` when under it.
 * @param {import('ioredis').Redis} redis @param {string} url @param {number} limit
 */
async function overRate(redis, url, limit) {
  const now = Date.now();
  const recent = await redis
    .multi()
    .zremrangebyscore('warm:recent', 0, now - 60_000)
    .zcard('warm:recent')
    .exec();
  if (Number(recent?.[1]?.[1]) >= limit) return true;
  await redis.multi().zadd('warm:recent', now, `${now}:${url}`).expire('warm:recent', 120).exec();
  return false;
}
