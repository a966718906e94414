// The chain's proxy whitelist (PROXY_WHITELIST=chain): the remote images that posts and comments on the Hive
// chain reference, as images.hive.blog proxies only those. The chain follower (purge-service hive-follow.js)
// and its backfill record each image URL of a `comment` operation, resolved as a request's is (our own and
// other proxies' URLs unwrapped, so a takedown and the whitelist name one source alike); the origin asks
// whether a source is there before it fetches anything (origin/src/whitelist.js).
import { resolveSource } from './sources.js';

/** A Redis hash: source id → the first block that referenced it (0 for a backfilled list). */
export const WHITELIST_KEY = 'proxy:whitelist';

/**
 * Records the sources `urls` name as referenced in `block` (the first block is kept). What does not resolve
 * to a remote source (not a URL; our own upload) is left out. The number of sources new to the list.
 * @param {import('ioredis').Redis} redis @param {string[]} urls @param {number} block
 * @param {import('./sources.js').UnwrapOptions} unwrap
 */
export async function recordReferences(redis, urls, block, unwrap) {
  const ids = new Set();
  for (const url of urls) {
    try {
      const source = resolveSource(url, unwrap);
      if (!source.uploadKey) ids.add(source.id);
    } catch {
      // not an http(s) URL: nothing a request could ask for
    }
  }
  if (!ids.size) return 0;
  const multi = redis.multi();
  for (const id of ids) multi.hsetnx(WHITELIST_KEY, id, String(block));
  const results = (await multi.exec()) || [];
  return results.filter(([err, added]) => !err && added === 1).length;
}
