// Every place a purge goes, in one shape and one order (inner layer before outer): the resolver's cached
// mappings, every varnish node, the origins' own caches, the CDN. The worker (worker.js) hands each target
// the batch it wants, retried and timed under the target's name.
import { TAKEDOWN_EVICT_CHANNEL, avatarPaths } from '@stack/lib';
import { purgeResolver } from './resolver.js';

/**
 * @typedef {{ kinds: Map<string, 'avatar'|'cover'|'both'>, tags: string[], sources: Map<string, string[]>, changed: string[] }} PurgeBatch
 *   kinds: the accounts whose avatars changed; tags: xkey tags (img:<id>); sources: each purged source with
 *   the paths it was served under; changed: sources whose stored bytes changed (scrub-store), never deleted
 * @typedef {{ name: string, wants: (batch: PurgeBatch) => boolean, purge: (batch: PurgeBatch) => Promise<void> }} PurgeTarget
 */

/**
 * The targets of this purge service, in order.
 * @param {{ redis: import('ioredis').Redis, varnish: ReturnType<typeof import('./varnish.js').createVarnishTarget>,
 *   nodes: ReturnType<typeof import('../node-queue.js').createNodeQueue>,
 *   cdn: ReturnType<typeof import('./cloudflare.js').createCloudflareTarget> | null, bases: string[] }} deps
 * @returns {PurgeTarget[]}
 */
export function purgeTargets({ redis, varnish, nodes, cdn, bases }) {
  /** @type {PurgeTarget[]} */
  const targets = [
    {
      name: 'resolver',
      wants: (batch) => batch.kinds.size > 0,
      purge: (batch) => purgeResolver(redis, [...batch.kinds.keys()]),
    },
    {
      // a node that is away gets the purge later from its own queue (node-queue.js)
      name: 'varnish',
      wants: () => true,
      async purge(batch) {
        const done = await varnish.purge(batch.kinds, batch.tags);
        for (const node of done.failed) await nodes.defer(node, done);
      },
    },
    {
      // each live origin drops these sources at once; one that is down keeps the bytes but never serves
      // them while the list blocks them
      name: 'origin',
      wants: (batch) => batch.sources.size > 0,
      async purge(batch) {
        await redis.publish(
          TAKEDOWN_EVICT_CHANNEL,
          JSON.stringify({ sources: Object.fromEntries(batch.sources), changed: batch.changed }),
        );
      },
    },
  ];
  if (cdn) {
    // the URLs of a batch already purged, so that a retry asks only for the rest
    /** @type {WeakMap<PurgeBatch, Set<string>>} */
    const purged = new WeakMap();
    targets.push({
      name: 'cdn',
      wants: (batch) => cdnUrls(batch, bases).length > 0,
      purge(batch) {
        const done = purged.get(batch) ?? new Set();
        purged.set(batch, done);
        return cdn.purge(cdnUrls(batch, bases), done);
      },
    });
  }
  return targets;
}

/** The public URLs a batch names at the CDN: avatars and every path of every source. @param {PurgeBatch} batch @param {string[]} bases */
function cdnUrls(batch, bases) {
  const paths = [
    ...[...batch.kinds].flatMap(([account, kind]) => avatarPaths(account, kind)),
    ...[...batch.sources.values()].flat(),
  ];
  return bases.flatMap((base) => paths.map((path) => base + path));
}

/** A target's failure after its retries, naming it (the dead letter records which). */
export class TargetError extends Error {
  /** @param {string} target @param {unknown} cause */
  constructor(target, cause) {
    super(String(/** @type {Error} */ (cause)?.message ?? cause), { cause });
    this.name = 'TargetError';
    this.target = target;
  }
}
