import { awaitReplicas } from './redis.js';

/**
 * @typedef {{ account: string, kind: 'avatar'|'cover'|'both', avatar?: string, cover?: string, source: string }} PurgeEvent
 */

// XADD only when the once-key is new: a webhook's signature is recorded in the same step as its event,
// so a retry after a failure is never refused as a replay, and a replay never queues twice.
const ADD_ONCE = `if redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[1]) then
  return redis.call('XADD', KEYS[2], '*', unpack(ARGV, 2))
end
return false`;

/**
 * Appends a purge event to the Redis stream the purge service consumes. Resolves only once Redis has it
 * (the stack's Redis runs appendfsync always: on disk) and, with REDIS_ACK_REPLICAS, once that many replicas
 * hold it too, so a caller may acknowledge its own caller after. When the replicas do not confirm, the
 * once-key is dropped again: the caller's retry is queued (a second purge, harmless), never refused as a replay.
 * @param {import('ioredis').Redis} redis @param {string} stream @param {PurgeEvent} event
 * @param {{ once?: { key: string, ttlS: number }, durability?: { REDIS_ACK_REPLICAS?: number, REDIS_ACK_TIMEOUT_MS?: number } }} [options]
 *   once: refuse (resolve null) when this key was seen within ttlS
 * @returns {Promise<string | null>} the stream entry id, or null for a repeat
 */
export async function enqueuePurge(redis, stream, event, { once, durability = {} } = {}) {
  const fields = ['account', event.account, 'kind', event.kind, 'source', event.source, 'at', String(Date.now())];
  if (event.avatar) fields.push('avatar', event.avatar);
  if (event.cover) fields.push('cover', event.cover);
  const id = once
    ? /** @type {string | null} */ (await redis.eval(ADD_ONCE, 2, once.key, stream, String(once.ttlS), ...fields))
    : /** @type {string} */ (await redis.xadd(stream, '*', ...fields));
  if (!id) return id;
  try {
    await awaitReplicas(redis, durability);
  } catch (err) {
    if (once) await redis.del(once.key).catch(() => {});
    throw err;
  }
  return id;
}
