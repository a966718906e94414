/**
 * @typedef {{ account: string, kind: 'avatar'|'cover'|'both', avatar?: string, cover?: string, source: string }} PurgeEvent
 */

/**
 * Appends a purge event to the Redis stream the purge service consumes. Resolves only once Redis has it
 * (with appendfsync always, on disk), so a caller may acknowledge its own caller after this.
 * @param {import('ioredis').Redis} redis @param {string} stream @param {PurgeEvent} event
 * @returns {Promise<string>} the stream entry id
 */
export async function enqueuePurge(redis, stream, event) {
  const fields = ['account', event.account, 'kind', event.kind, 'source', event.source, 'at', String(Date.now())];
  if (event.avatar) fields.push('avatar', event.avatar);
  if (event.cover) fields.push('cover', event.cover);
  return /** @type {string} */ (await redis.xadd(stream, '*', ...fields));
}
