// What the resolver and the purge service must agree on: cache keys, the invalidation channel, the URLs.

/** The resolver's cached mapping (with a TTL). @param {string} account */
export const avatarCacheKey = (account) => `avatar:map:${account}`;

/** The last mapping ever resolved (no TTL): served when the upstream is down. @param {string} account */
export const avatarLastKey = (account) => `avatar:last:${account}`;

/** Pub/sub channel: a published account name evicts it from every resolver's in-process LRU. */
export const AVATAR_INVALIDATE_CHANNEL = 'avatar:invalidate';

export const AVATAR_SIZES = /** @type {const} */ ({ small: 64, medium: 128, large: 512 });
export const COVER_SIZE = /** @type {const} */ ({ width: 1344, height: 240 });

/** Every public path that answers for an account's images. @param {string} account @param {'avatar'|'cover'|'both'} kind */
export function avatarPaths(account, kind = 'both') {
  const paths = [];
  if (kind !== 'cover') {
    paths.push(`/u/${account}/avatar`);
    for (const size of Object.keys(AVATAR_SIZES)) paths.push(`/u/${account}/avatar/${size}`);
  }
  if (kind !== 'avatar') paths.push(`/u/${account}/cover`);
  return paths;
}
