import os from 'node:os';
import { isUploadKey } from '@stack/lib';
import { retry } from './retry.js';
import { TargetError, purgeTargets } from './targets/index.js';
import { servedPaths, settle, takedownEvent, takedownTargets } from './takedown-purge.js';

/** @typedef {[string, string[]]} StreamEntry  [id, [field, value, …]] */

/** @param {string[]} fields */
export function fieldsOf(fields) {
  /** @type {Record<string, string>} */
  const object = {};
  for (let i = 0; i < fields.length; i += 2) object[fields[i]] = fields[i + 1];
  return object;
}

/** Coalesces a batch: one purge per account, with the union of what changed. @param {StreamEntry[]} entries */
export function coalesce(entries) {
  /** @type {Map<string, 'avatar'|'cover'|'both'>} */
  const kinds = new Map();
  for (const [, fields] of entries) {
    const { account, kind = 'both' } = fieldsOf(fields);
    if (!account) continue;
    const before = kinds.get(account);
    kinds.set(account, !before || before === kind ? /** @type {any} */ (kind) : 'both');
  }
  return kinds;
}

/**
 * The purge workers: read the stream as a consumer group, purge the resolver cache, then every varnish
 * node, then the CDN (inner layer before outer), and acknowledge an event only after all succeeded (a
 * varnish node that is away gets the purge later from its own queue: node-queue.js). A
 * takedown (type=takedown) purges every source it covers (xkey img:<id>, the origins' caches, each URL the
 * source was served under at the CDN) and, for an account, its avatars as an avatar change does.
 * Failed targets are retried with backoff; events whose retries ran out go to the dead-letter stream.
 * Pending events of this consumer (a restart) are read first; those of crashed consumers are claimed.
 * @param {{ redis: import('ioredis').Redis, config: import('@stack/lib/src/config-types.js').PurgeServiceConfig, logger: import('pino').Logger,
 *   varnish: ReturnType<typeof import('./targets/varnish.js').createVarnishTarget>,
 *   nodes: ReturnType<typeof import('./node-queue.js').createNodeQueue>,
 *   cdn: ReturnType<typeof import('./targets/cloudflare.js').createCloudflareTarget> | null,
 *   metrics: ReturnType<typeof import('./metrics.js').createPurgeMetrics> }} deps
 */
export function createWorker({ redis, config, logger, varnish, nodes, cdn, metrics }) {
  const stream = config.PURGE_STREAM;
  const group = config.PURGE_GROUP;
  // (the host name by default: declared empty, so .env.example is the same on every machine)
  const consumer = config.PURGE_CONSUMER || os.hostname();
  const reader = redis.duplicate({ enableOfflineQueue: true }); // blocking reads get their own connection
  reader.on('error', () => {});
  const bases = config.CDN_PURGE_BASES.length ? config.CDN_PURGE_BASES : [config.PUBLIC_URL];
  const targets = purgeTargets({ redis, varnish, nodes, cdn, bases });
  /** @type {Set<string>} */
  const processing = new Set();
  /** @type {Set<Promise<void>>} */
  const inFlight = new Set();
  let running = false;
  let lastClaim = 0;
  /** @type {Promise<void> | null} */
  let loopDone = null;

  async function ensureGroup() {
    try {
      await reader.xgroup('CREATE', stream, group, '0', 'MKSTREAM');
    } catch (err) {
      if (!String(/** @type {Error} */ (err).message).includes('BUSYGROUP')) throw err;
    }
  }

  /** @param {string} target @param {() => Promise<void>} work */
  function step(target, work) {
    return retry(
      async () => {
        const end = metrics.duration.startTimer({ target });
        try {
          await work();
          end({ outcome: 'ok' });
        } catch (err) {
          end({ outcome: 'error' });
          throw err;
        }
      },
      {
        attempts: config.PURGE_MAX_ATTEMPTS,
        baseMs: config.PURGE_RETRY_BASE_MS,
        maxMs: config.PURGE_RETRY_MAX_MS,
        onRetry: (err, attempt) => {
          metrics.retries.inc({ target });
          logger.warn({ target, attempt, err: /** @type {Error} */ (err).message }, 'purge target failed, retrying');
        },
      },
    ).catch((err) => {
      throw new TargetError(target, err);
    });
  }

  /** Acknowledge and delete: the stream then holds only what is not done, so its length is the backlog. @param {string[]} ids */
  async function ack(ids) {
    await retry(
      () =>
        redis
          .multi()
          .xack(stream, group, ...ids)
          .xdel(stream, ...ids)
          .exec(),
      { attempts: 1000, baseMs: 100, maxMs: 2000 },
    );
  }

  /** @param {StreamEntry[]} entries @param {unknown} err */
  async function deadLetter(entries, err) {
    const target = err instanceof TargetError ? err.target : 'unknown';
    const multi = redis.multi();
    for (const [id, fields] of entries) {
      multi.xadd(
        config.PURGE_DEAD_STREAM,
        '*',
        ...fields,
        'original_id',
        id,
        'failed_target',
        target,
        'error',
        String(/** @type {Error} */ (err).message).slice(0, 500),
      );
    }
    await retry(() => multi.exec(), { attempts: 1000, baseMs: 100, maxMs: 2000 });
    metrics.deadLetters.inc(entries.length);
    logger.error(
      { target, events: entries.length, err: /** @type {Error} */ (err).message },
      'purge events dead-lettered',
    );
  }

  /**
   * A batch's takedowns: what they cover, once every live node enforces them (see settle).
   * @param {import('./takedown-purge.js').TakedownEvent[]} events
   * @returns {Promise<import('./takedown-purge.js').TakedownTargets>}
   */
  async function takedowns(events) {
    /** @type {import('./takedown-purge.js').TakedownTargets} */
    let targets = { sources: new Map(), accounts: new Set(), version: 0 };
    if (!events.length) return targets;
    await step('takedown', async () => {
      targets = await takedownTargets(redis, events);
    });
    const end = metrics.takedownSettle.startTimer();
    const settled = await settle(redis, targets.version, {
      pollMs: config.TAKEDOWN_POLL_MS,
      timeoutMs: config.TAKEDOWN_SETTLE_TIMEOUT_MS,
    }).catch(() => false);
    end();
    if (!settled) logger.warn({ version: targets.version }, 'takedown purged before every node confirmed the list');
    return targets;
  }

  /** @param {StreamEntry[]} entries */
  async function processBatch(entries) {
    const kinds = coalesce(entries);
    const started = performance.now();
    try {
      const events = entries.map(([, fields]) => fieldsOf(fields));
      const removed = await takedowns(events.filter((fields) => fields.type === 'takedown').map(takedownEvent));
      // originals whose stored bytes changed (scrub-store): out of every cache, under every path they were served
      const changed = events
        .filter((fields) => fields.type === 'changed' && isUploadKey(fields.key || ''))
        .map((fields) => fields.key);
      if (changed.length) {
        await step('origin', async () => {
          for (const [key, paths] of await servedPaths(redis, changed))
            removed.sources.set(key, [...new Set([...(removed.sources.get(key) || []), `/${key}`, ...paths])]);
        });
      }
      for (const account of removed.accounts) kinds.set(account, 'both');
      /** @type {import('./targets/index.js').PurgeBatch} */
      const batch = {
        kinds,
        tags: [...removed.sources.keys()].map((id) => `img:${id}`),
        sources: removed.sources,
        changed,
      };
      for (const target of targets) if (target.wants(batch)) await step(target.name, () => target.purge(batch));
      metrics.batchDuration.observe((performance.now() - started) / 1000);
      for (const [id] of entries)
        metrics.eventLatency.observe(Math.max(0, Date.now() - Number(id.split('-')[0])) / 1000);
    } catch (err) {
      await deadLetter(entries, err);
    }
    await ack(entries.map(([id]) => id));
    metrics.acked.inc(entries.length);
  }

  /** @returns {Promise<StreamEntry[]>} */
  async function nextEntries(/** @type {{ own: string | null }} */ cursor) {
    if (cursor.own !== null) {
      const own = /** @type {any} */ (
        await reader.xreadgroup('GROUP', group, consumer, 'COUNT', config.PURGE_BATCH, 'STREAMS', stream, cursor.own)
      );
      const entries = /** @type {StreamEntry[]} */ (own?.[0]?.[1] || []).filter(([, fields]) => fields);
      if (!entries.length) cursor.own = null;
      else cursor.own = entries[entries.length - 1][0];
      if (entries.length) return entries;
    }
    if (Date.now() - lastClaim > config.PURGE_CLAIM_IDLE_MS / 2) {
      lastClaim = Date.now();
      const claimed = /** @type {any} */ (
        await reader.xautoclaim(stream, group, consumer, config.PURGE_CLAIM_IDLE_MS, '0-0', 'COUNT', config.PURGE_BATCH)
      );
      const entries = /** @type {StreamEntry[]} */ (claimed?.[1] || []).filter(
        ([id, fields]) => fields && !processing.has(id),
      );
      if (entries.length) return entries;
    }
    const fresh = /** @type {any} */ (
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
    return fresh?.[0]?.[1] || [];
  }

  async function loop() {
    const cursor = { own: /** @type {string | null} */ ('0') };
    while (running) {
      try {
        while (inFlight.size >= config.PURGE_CONCURRENCY) await Promise.race(inFlight);
        await ensureGroup();
        const entries = await nextEntries(cursor);
        if (!entries.length) continue;
        for (const [id] of entries) processing.add(id);
        const task = processBatch(entries).finally(() => {
          for (const [id] of entries) processing.delete(id);
          inFlight.delete(task);
        });
        inFlight.add(task);
      } catch (err) {
        if (!running) break;
        logger.warn({ err: /** @type {Error} */ (err).message }, 'purge stream read failed');
        cursor.own = '0';
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    }
    await Promise.all(inFlight);
  }

  return {
    start() {
      running = true;
      loopDone = loop();
    },
    async stop() {
      running = false;
      reader.disconnect();
      await loopDone;
    },
  };
}
