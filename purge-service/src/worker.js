import os from 'node:os';
import { createBatchPurge } from './purge/batch.js';
import { createPurgeStream } from './purge/stream.js';
import { purgeTargets } from './targets/index.js';

/**
 * The purge workers: read the stream as a consumer group (purge/stream.js), purge each batch (the resolver
 * cache, then every varnish node, then the CDN: purge/batch.js), and acknowledge an event only after all
 * succeeded (a varnish node that is away gets the purge later from its own queue: node-queue.js). A
 * takedown (type=takedown) purges every source it covers (xkey img:<id>, the origins' caches, each URL the
 * source was served under at the CDN) and, for an account, its avatars as an avatar change does.
 * Failed targets are retried with backoff; events whose retries ran out go to the dead-letter stream.
 * Up to PURGE_CONCURRENCY batches at once.
 * @param {{ redis: import('ioredis').Redis, config: import('@stack/lib/src/config-types.js').PurgeServiceConfig, logger: import('pino').Logger,
 *   varnish: ReturnType<typeof import('./targets/varnish.js').createVarnishTarget>,
 *   nodes: ReturnType<typeof import('./node-queue.js').createNodeQueue>,
 *   cdn: ReturnType<typeof import('./targets/cloudflare.js').createCloudflareTarget> | null,
 *   metrics: ReturnType<typeof import('./metrics.js').createPurgeMetrics> }} deps
 */
export function createWorker({ redis, config, logger, varnish, nodes, cdn, metrics }) {
  const reader = redis.duplicate({ enableOfflineQueue: true }); // blocking reads get their own connection
  reader.on('error', () => {});
  // (the host name by default: declared empty, so .env.example is the same on every machine)
  const consumer = config.PURGE_CONSUMER || os.hostname();
  const stream = createPurgeStream({ redis, reader, consumer, config, logger, metrics });
  const bases = config.CDN_PURGE_BASES.length ? config.CDN_PURGE_BASES : [config.PUBLIC_URL];
  const targets = purgeTargets({ redis, varnish, nodes, cdn, bases });
  const purgeBatch = createBatchPurge({ redis, config, logger, metrics, targets });
  /** @type {Set<Promise<void>>} */
  const inFlight = new Set();
  let running = false;
  /** @type {Promise<void> | null} */
  let loopDone = null;

  /** Purged (or dead-lettered), then acknowledged. @param {import('./purge/stream.js').StreamEntry[]} entries */
  async function processBatch(entries) {
    const started = performance.now();
    try {
      await purgeBatch(entries);
      metrics.batchDuration.observe((performance.now() - started) / 1000);
      for (const [id] of entries)
        metrics.eventLatency.observe(Math.max(0, Date.now() - Number(id.split('-')[0])) / 1000);
    } catch (err) {
      await stream.deadLetter(entries, err);
    }
    await stream.ack(entries.map(([id]) => id));
    metrics.acked.inc(entries.length);
  }

  async function loop() {
    const cursor = { own: /** @type {string | null} */ ('0') };
    while (running) {
      try {
        while (inFlight.size >= config.PURGE_CONCURRENCY) await Promise.race(inFlight);
        const entries = await stream.next(cursor);
        if (!entries.length) continue;
        for (const [id] of entries) stream.processing.add(id);
        const task = processBatch(entries).finally(() => {
          for (const [id] of entries) stream.processing.delete(id);
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
