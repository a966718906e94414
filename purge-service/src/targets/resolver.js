import { AVATAR_INVALIDATE_CHANNEL, avatarCacheKey } from '@stack/lib';

/**
 * First target: the resolver's cached mappings, so the next lookup reads the source. Deleting the Redis
 * entry and publishing on the channel evicts every resolver process's in-memory copy too.
 * @param {import('ioredis').Redis} redis @param {string[]} accounts
 */
export async function purgeResolver(redis, accounts) {
  const multi = redis.multi();
  for (const account of accounts) {
    multi.del(avatarCacheKey(account));
    multi.publish(AVATAR_INVALIDATE_CHANNEL, account);
  }
  const results = await multi.exec();
  const failed = results?.find(([err]) => err);
  if (!results || failed) throw failed?.[0] || new Error('redis transaction aborted');
}
