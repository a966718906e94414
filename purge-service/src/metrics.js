import { client } from '@stack/lib';

/**
 * @param {import('prom-client').Registry} registry
 * @param {{ redis: import('ioredis').Redis, stream: string, group: string, deadStream: string }} queue
 */
export function createPurgeMetrics(registry, queue) {
  const registers = [registry];
  const { redis, stream, group, deadStream } = queue;
  // queue gauges are read from Redis at scrape time, so they are true whichever worker did the work
  new client.Gauge({
    name: 'purge_queue_length',
    help: 'Events in the stream not yet acknowledged (acknowledged ones are deleted)',
    registers,
    async collect() {
      this.set(await redis.xlen(stream).catch(() => 0));
    },
  });
  new client.Gauge({
    name: 'purge_pending',
    help: 'Events delivered to a worker and not yet acknowledged',
    registers,
    async collect() {
      const summary = /** @type {any} */ (await redis.xpending(stream, group).catch(() => [0]));
      this.set(Number(summary?.[0]) || 0);
    },
  });
  new client.Gauge({
    name: 'purge_lag_seconds',
    help: 'Age of the oldest event not yet acknowledged (0 when the queue is empty)',
    registers,
    async collect() {
      const oldest = /** @type {any} */ (await redis.xrange(stream, '-', '+', 'COUNT', 1).catch(() => []));
      this.set(oldest.length ? Math.max(0, Date.now() - Number(String(oldest[0][0]).split('-')[0])) / 1000 : 0);
    },
  });
  new client.Gauge({
    name: 'purge_dead_letter_length',
    help: 'Events in the dead-letter stream, waiting for an operator',
    registers,
    async collect() {
      this.set(await redis.xlen(deadStream).catch(() => 0));
    },
  });
  return {
    warmed: new client.Counter({
      name: 'purge_warm_images_total',
      help: "New posts' images by what the warmer did: warmed, skipped (by reason: post_cap, author_rate, rate, bytes_cap, author, domain, seen, stale, blocked) or failed (busy: the origin had no idle capacity in time; status_<code>, error)",
      labelNames: ['result', 'reason'],
      registers,
    }),
    warmPosts: new client.Counter({ name: 'purge_warm_posts_total', help: 'Posts the warmer went through', registers }),
    received: new client.Counter({
      name: 'purge_events_received_total',
      help: 'Webhook calls and chain events received, by source and result',
      labelNames: ['source', 'result'],
      registers,
    }),
    queued: new client.Counter({
      name: 'purge_events_queued_total',
      help: 'Events durably queued',
      labelNames: ['source'],
      registers,
    }),
    nodeDeferred: new client.Counter({
      name: 'purge_node_deferred_total',
      help: 'Purges a varnish node did not take at once, kept in its own queue',
      labelNames: ['node'],
      registers,
    }),
    nodeFailures: new client.Counter({
      name: 'purge_node_retry_failures_total',
      help: "Retries of a varnish node's missed purges that failed (the node still away)",
      labelNames: ['node'],
      registers,
    }),
    nodeBacklog: new client.Gauge({
      name: 'purge_node_backlog',
      help: 'Purges waiting for a varnish node (first 100 counted)',
      labelNames: ['node'],
      registers,
    }),
    nodeLag: new client.Gauge({
      name: 'purge_node_lag_seconds',
      help: 'Age of the oldest purge waiting for a varnish node',
      labelNames: ['node'],
      registers,
    }),
    acked: new client.Counter({
      name: 'purge_events_acked_total',
      help: 'Events acknowledged (every target purged, or dead-lettered)',
      registers,
    }),
    duration: new client.Histogram({
      name: 'purge_target_duration_seconds',
      help: 'Time of one purge call per target (resolver, varnish, cdn)',
      labelNames: ['target', 'outcome'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers,
    }),
    batchDuration: new client.Histogram({
      name: 'purge_batch_duration_seconds',
      help: 'Time to purge one coalesced batch on every target',
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    }),
    eventLatency: new client.Histogram({
      name: 'purge_event_latency_seconds',
      help: 'From queued to purged everywhere',
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    }),
    retries: new client.Counter({
      name: 'purge_retries_total',
      help: 'Retried purge calls by target',
      labelNames: ['target'],
      registers,
    }),
    takedowns: new client.Counter({
      name: 'purge_takedown_changes_total',
      help: 'Takedown entries that became blocked or unblocked, by action',
      labelNames: ['action'],
      registers,
    }),
    takedownSettle: new client.Histogram({
      name: 'purge_takedown_settle_seconds',
      help: 'Wait until every live node enforced a takedown, before its purge',
      buckets: [0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers,
    }),
    deadLetters: new client.Counter({
      name: 'purge_dead_letters_total',
      help: 'Events moved to the dead-letter stream',
      registers,
    }),
    whitelisted: new client.Counter({
      name: 'purge_whitelisted_sources_total',
      help: 'Remote images recorded in the chain proxy whitelist (PROXY_WHITELIST=chain), new to it',
      registers,
    }),
    followedBlock: new client.Gauge({
      name: 'purge_hive_block',
      help: 'Last Hive block whose events are queued (the cursor)',
      registers,
    }),
  };
}
