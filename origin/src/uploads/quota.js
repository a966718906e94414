// An account's uploads over a rolling week (UPLOAD_QUOTA_PER_WEEK), in Redis.
import { HttpError } from '@stack/lib';

const WEEK_MS = 7 * 24 * 3600 * 1000;
// a rolling week: the account's uploads of the last 7 days by key (a retry of the same bytes, the same key,
// counts once), the oldest dropped as they age out; taken only while under the limit. Without a key (''),
// only whether the week is full.
const TAKE_QUOTA = `redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1] - ARGV[2])
if ARGV[4] ~= '' and redis.call('ZSCORE', KEYS[1], ARGV[4]) then return 0 end
local used = redis.call('ZCARD', KEYS[1])
if used >= tonumber(ARGV[3]) then return redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2] end
if ARGV[4] == '' then return 0 end
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 0`;

/**
 * Per-account quota over a rolling week in Redis, one count per distinct upload (a retried upload of the
 * same bytes is not counted again); Redis down means no upload (503), never an unmetered one. Past the limit
 * a 429 whose Retry-After says when the oldest upload of the window ages out. With `key` '' nothing is
 * taken: an account whose week is already full is refused before its body is read, checked or its
 * signature verified (a Hive API call), so a full account costs the origin one Redis call; a retry of an
 * upload the week already counts is refused with it (its URL is its content's hash, known to the client).
 * @param {import('ioredis').Redis} redis @param {string} account @param {number} limit @param {string} key the upload's key, or ''
 */
export async function takeQuota(redis, account, limit, key) {
  const now = Date.now();
  let oldest;
  try {
    oldest = Number(
      await redis.eval(TAKE_QUOTA, 1, `origin:quota:${account}`, String(now), String(WEEK_MS), String(limit), key),
    );
  } catch {
    throw new HttpError(503, 'unavailable', { reason: 'quota store' }, { 'Retry-After': '10' });
  }
  if (oldest) {
    const retryAfter = Math.max(1, Math.ceil((oldest + WEEK_MS - now) / 1000));
    throw new HttpError(
      429,
      'quota_exceeded',
      { limit, period: 'rolling week' },
      { 'Retry-After': String(retryAfter), ...(key ? {} : { Connection: 'close' }) },
    );
  }
}
