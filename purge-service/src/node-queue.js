// Each varnish node's purges apart: a node that is down does not hold up the others or the CDN. What a node
// could not take is kept in Redis, in that node's own stream (durable like the purge stream), and sent to
// it as soon as it answers again, oldest first.

import { inRounds } from './rounds.js';

const NODES = 'purge:nodes';
// a node is forgotten only when its stream is empty, in one step (a purge deferred meanwhile keeps it listed)
const FORGET_IF_EMPTY = `if redis.call('XLEN', KEYS[1]) == 0 then redis.call('SREM', KEYS[2], ARGV[1]) end return 0`;
/** @param {string} node */
const streamOf = (node) => `purge:node:${node}`;

/**
 * @param {{ redis: import('ioredis').Redis, varnish: ReturnType<typeof import('./targets/varnish.js').createVarnishTarget>,
 *   config: import('@stack/lib/src/config-types.js').PurgeServiceConfig, logger: import('pino').Logger, metrics: ReturnType<typeof import('./metrics.js').createPurgeMetrics> }} deps
 */
export function createNodeQueue({ redis, varnish, config, logger, metrics }) {
  /**
   * Keeps a purge for a node that did not take it. @param {string} node
   * @param {{ xkeys: string[], paths: string[] }} purge
   */
  async function defer(node, purge) {
    await redis
      .multi()
      .xadd(streamOf(node), '*', 'xkeys', purge.xkeys.join(' '), 'paths', purge.paths.join(' '))
      .sadd(NODES, node)
      .exec();
    metrics.nodeDeferred.inc({ node });
  }

  /** Sends one node what it missed, oldest first; stops at the first failure (the node is still away). @param {string} node */
  async function drain(node) {
    const entries = await redis.xrange(streamOf(node), '-', '+', 'COUNT', 100);
    observe(node, entries);
    for (const [id, fields] of entries) {
      const field = (/** @type {string} */ name) => fields[fields.indexOf(name) + 1] || '';
      const tooOld = Date.now() - Number(id.split('-')[0]) > config.PURGE_NODE_MAX_AGE_S * 1000;
      if (!tooOld) {
        try {
          await varnish.purgeNode(
            node,
            field('xkeys').split(' ').filter(Boolean),
            field('paths').split(' ').filter(Boolean),
          );
        } catch (err) {
          metrics.nodeFailures.inc({ node });
          logger.debug({ node, err: /** @type {Error} */ (err).message }, 'varnish node still away');
          return;
        }
      }
      await redis.xdel(streamOf(node), id);
    }
    if (entries.length < 100) {
      await redis.eval(FORGET_IF_EMPTY, 2, streamOf(node), NODES, node);
      observe(node, []);
    }
  }

  /** Per-node backlog and lag in the metrics. @param {string} node @param {Array<[string, string[]]>} entries */
  function observe(node, entries) {
    metrics.nodeBacklog.set({ node }, entries.length);
    metrics.nodeLag.set({ node }, entries.length ? (Date.now() - Number(entries[0][0].split('-')[0])) / 1000 : 0);
  }

  /** Every node configured has its series, at 0 while it misses nothing. */
  async function observeAll() {
    for (const node of await varnish.addresses().catch(() => [])) {
      metrics.nodeFailures.inc({ node }, 0);
      metrics.nodeDeferred.inc({ node }, 0);
      metrics.nodeBacklog.set({ node }, 0);
      metrics.nodeLag.set({ node }, 0);
    }
  }

  let observed = false;
  /** One round: every node with missed purges gets them, in turn (the first round first zeroes every node's series). */
  async function round() {
    if (!observed) {
      observed = true;
      await observeAll();
    }
    for (const node of await redis.smembers(NODES)) await drain(node);
  }

  const rounds = inRounds({
    work: round,
    everyMs: config.PURGE_NODE_RETRY_MS,
    logger,
    what: 'varnish node queue read failed',
  });
  return { defer, start: rounds.start, stop: rounds.stop };
}
