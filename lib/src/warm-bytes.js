// The warmer's bytes of the day (WARM_MAX_BYTES_PER_DAY): the variants the purge service's warmer received and
// the originals the origin fetched for it, counted under one key per UTC day, kept two days.

/** The day's key. */
export const warmBytesKey = () => `warm:bytes:${new Date().toISOString().slice(0, 10)}`;

/** Adds `bytes` to the day's count. @param {import('ioredis').Redis} redis @param {number} bytes */
export async function countWarmBytes(redis, bytes) {
  const key = warmBytesKey();
  await redis
    .multi()
    .incrby(key, bytes)
    .expire(key, 2 * 86_400)
    .exec();
}
