/** Redis key of an account's mapping in the local source. @param {string} account */
export const localKey = (account) => `avatar:local:${account}`;

/**
 * Local: the mappings live in Redis, written by the admin API. Nothing upstream to protect, so no
 * Redis cache layer in front of it. The local store cannot know which accounts exist: an account
 * without a mapping gets the default images, never a 404.
 * @param {import('ioredis').Redis} redis
 */
export function localSource(redis) {
  return {
    name: 'local',
    /** @param {string[]} names */
    async fetchMany(names) {
      const pipeline = redis.pipeline();
      for (const name of names) pipeline.hgetall(localKey(name));
      const results = /** @type {Array<[Error | null, Record<string, string>]>} */ (await pipeline.exec());
      /** @type {Map<string, import('@stack/lib/src/hive-profile.js').Mapping>} */
      const found = new Map();
      results.forEach(([err, hash], index) => {
        if (err) throw err;
        found.set(names[index], { avatar: hash?.avatar || null, cover: hash?.cover || null });
      });
      return found;
    },
  };
}
