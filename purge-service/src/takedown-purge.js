import { SERVED_KEYS, TAKEDOWN_KEYS, compileList, entryField } from '@stack/lib';

/**
 * @typedef {{ action: string, kind: string, value: string, version: number }} TakedownEvent
 * @typedef {{ sources: Map<string, string[]>, accounts: Set<string>, version: number }} TakedownTargets
 */

/** @param {Record<string, string>} fields @returns {TakedownEvent} */
export const takedownEvent = (fields) => ({
  action: fields.action,
  kind: fields.kind,
  value: fields.value,
  version: Number(fields.version) || 0,
});

/**
 * What a batch of takedown events (blocks and unblocks alike: both must leave every cache) covers: the
 * sources (by id, with every path they were served under), and the accounts whose avatars change.
 * @param {import('ioredis').Redis} redis @param {TakedownEvent[]} events @returns {Promise<TakedownTargets>}
 */
export async function takedownTargets(redis, events) {
  /** @type {Set<string>} */
  const ids = new Set();
  const accounts = new Set();
  const matcher = compileList(
    events.filter((e) => ['url', 'domain', 'pattern'].includes(e.kind)).map((e) => entryField(/** @type {any} */ (e))),
  );
  for (const event of events) {
    if (event.kind === 'key') ids.add(event.value);
    if (event.kind === 'account') {
      accounts.add(event.value);
      for (const key of await redis.smembers(TAKEDOWN_KEYS.uploads(event.value))) ids.add(key);
    }
  }
  if (matcher.size) {
    // every remembered source whose URL the events cover (a domain or a pattern covers many)
    let cursor = '0';
    do {
      const [next, flat] = await redis.hscan(SERVED_KEYS.sources, cursor, 'COUNT', 1000);
      cursor = next;
      for (let i = 0; i < flat.length; i += 2) {
        if (flat[i + 1] && matcher.source({ url: flat[i + 1] })) ids.add(flat[i]);
      }
    } while (cursor !== '0');
  }
  return { sources: await servedPaths(redis, ids), accounts, version: Math.max(0, ...events.map((e) => e.version)) };
}

/**
 * Every path each source was served under (the takedown record), by id.
 * @param {import('ioredis').Redis} redis @param {Iterable<string>} ids @returns {Promise<Map<string, string[]>>}
 */
export async function servedPaths(redis, ids) {
  const list = [...ids];
  const pipeline = redis.pipeline();
  for (const id of list) pipeline.zrange(SERVED_KEYS.paths + id, '0', '-1');
  const results = /** @type {[Error | null, string[]][]} */ ((await pipeline.exec()) || []);
  // recorded before paths were kept by time (a set): read as they are
  for (const [i, [err]] of results.entries()) {
    if (err && /WRONGTYPE/.test(err.message)) results[i] = [null, await redis.smembers(SERVED_KEYS.paths + list[i])];
  }
  const failed = results.find(([err]) => err);
  if (failed) throw failed[0];
  return new Map(list.map((id, i) => [id, results[i][1]]));
}

/**
 * Waits until every live node (one that wrote its version within three poll intervals) holds list
 * `version`: a node still on the old list could otherwise answer with the image again right after the
 * purge, and a cache would keep it. Gives up after `timeoutMs` (a node that hangs must not stop takedowns).
 * @param {import('ioredis').Redis} redis @param {number} version @param {{ pollMs: number, timeoutMs: number }} options
 * @returns {Promise<boolean>} whether every live node had it
 */
export async function settle(redis, version, { pollMs, timeoutMs }) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const seen = await redis.hgetall(TAKEDOWN_KEYS.seen);
    const now = Date.now();
    const behind = Object.entries(seen).filter(([node, text]) => {
      const [held, at] = text.split(' ').map(Number);
      if (now - at > 60000) redis.hdel(TAKEDOWN_KEYS.seen, node).catch(() => {}); // gone for a minute: forgotten
      return now - at <= 3 * pollMs && held < version;
    });
    if (!behind.length) return true;
    if (Date.now() >= deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
