// The purge stream read as a consumer group: this consumer's pending events first (a restart), then those
// of crashed consumers (claimed), then new ones; an event acknowledged and deleted once purged (so the
// stream's length is the backlog), or moved to the dead-letter stream when its retries ran out.
import { retry } from '../retry.js';
import { TargetError } from '../targets/index.js';

/** @typedef {[string, string[]]} StreamEntry  [id, [field, value, …]] */

/** @param {string[]} fields */
export function fieldsOf(fields) {
  /** @type {Record<string, string>} */
  const object = {};
  for (let i = 0; i < fields.length; i += 2) object[fields[i]] = fields[i + 1];
  return object;
}

/**
 * A stream's consumer group, made (with the stream) from its start when missing; one that exists is kept.
 * @param {import('ioredis').Redis} redis @param {string} stream @param {string} group
 */
export async function ensureGroup(redis, stream, group) {
  try {
    await redis.xgroup('CREATE', stream, group, '0', 'MKSTREAM');
  } catch (err) {
    if (!String(/** @type {Error} */ (err).message).includes('BUSYGROUP')) throw err;
  }
}

/**
 * @param {{ redis: import('ioredis').Redis, reader: import('ioredis').Redis, consumer: string,
 *   config: import('@stack/lib/src/config-types.js').PurgeServiceConfig, logger: import('pino').Logger,
 *   metrics: ReturnType<typeof import('../metrics.js').createPurgeMetrics> }} deps
 *   `reader`: a connection of its own, for the blocking reads
 */
export function createPurgeStream({ redis, reader, consumer, config, logger, metrics }) {
  const stream = config.PURGE_STREAM;
  const group = config.PURGE_GROUP;
  /** ids being purged here: never claimed back from ourselves @type {Set<string>} */
  const processing = new Set();
  let lastClaim = 0;

  /** This consumer's own pending events, from `cursor.own` ('0' at first; null once read). @param {{ own: string | null }} cursor */
  async function own(cursor) {
    if (cursor.own === null) return [];
    const answer = /** @type {any} */ (
      await reader.xreadgroup('GROUP', group, consumer, 'COUNT', config.PURGE_BATCH, 'STREAMS', stream, cursor.own)
    );
    const entries = /** @type {StreamEntry[]} */ (answer?.[0]?.[1] || []).filter(([, fields]) => fields);
    cursor.own = entries.length ? entries[entries.length - 1][0] : null;
    return entries;
  }

  /** Events of crashed consumers, idle past PURGE_CLAIM_IDLE_MS, looked for twice in that time. */
  async function claimed() {
    if (Date.now() - lastClaim <= config.PURGE_CLAIM_IDLE_MS / 2) return [];
    lastClaim = Date.now();
    const answer = /** @type {any} */ (
      await reader.xautoclaim(stream, group, consumer, config.PURGE_CLAIM_IDLE_MS, '0-0', 'COUNT', config.PURGE_BATCH)
    );
    return /** @type {StreamEntry[]} */ (answer?.[1] || []).filter(([id, fields]) => fields && !processing.has(id));
  }

  /** New events, waiting up to a second for one. @returns {Promise<StreamEntry[]>} */
  async function fresh() {
    const answer = /** @type {any} */ (
      await reader.xreadgroup(
        'GROUP',
        group,
        consumer,
        'COUNT',
        config.PURGE_BATCH,
        'BLOCK',
        1000,
        'STREAMS',
        stream,
        '>',
      )
    );
    return answer?.[0]?.[1] || [];
  }

  /** The next batch, ensuring the group first (Redis may have restarted empty). @param {{ own: string | null }} cursor */
  async function next(cursor) {
    await ensureGroup(reader, stream, group);
    for (const read of [() => own(cursor), claimed, fresh]) {
      const entries = await read();
      if (entries.length) return entries;
    }
    return [];
  }

  /** Acknowledge and delete. @param {string[]} ids */
  async function ack(ids) {
    await retry(
      () =>
        redis
          .multi()
          .xack(stream, group, ...ids)
          .xdel(stream, ...ids)
          .exec(),
      {
        attempts: 1000,
        baseMs: 100,
        maxMs: 2000,
      },
    );
  }

  /** @param {StreamEntry[]} entries @param {unknown} err */
  async function deadLetter(entries, err) {
    const target = err instanceof TargetError ? err.target : 'unknown';
    const message = String(/** @type {Error} */ (err).message);
    const multi = redis.multi();
    for (const [id, fields] of entries) {
      const notes = ['original_id', id, 'failed_target', target, 'error', message.slice(0, 500)];
      multi.xadd(config.PURGE_DEAD_STREAM, '*', ...fields, ...notes);
    }
    await retry(() => multi.exec(), { attempts: 1000, baseMs: 100, maxMs: 2000 });
    metrics.deadLetters.inc(entries.length);
    logger.error({ target, events: entries.length, err: message }, 'purge events dead-lettered');
  }

  return { next, ack, deadLetter, processing };
}
