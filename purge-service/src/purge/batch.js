// One batch of purge events purged: avatar changes coalesced per account, takedowns and changed originals
// turned into what they cover, then every target in order (the resolver's mappings, every varnish node, the
// origins' caches, the CDN: inner layer before outer), each retried with backoff.
import { isUploadKey } from '@stack/lib';
import { retry } from '../retry.js';
import { TargetError } from '../targets/index.js';
import { servedPaths, settle, takedownEvent, takedownTargets } from '../takedown-purge.js';
import { fieldsOf } from './stream.js';

/** Coalesces a batch: one purge per account, with the union of what changed. @param {import('./stream.js').StreamEntry[]} entries */
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
 * The purge of a batch; throws a TargetError naming the target whose retries ran out.
 * @param {{ redis: import('ioredis').Redis, config: import('@stack/lib/src/config-types.js').PurgeServiceConfig, logger: import('pino').Logger,
 *   metrics: ReturnType<typeof import('../metrics.js').createPurgeMetrics>,
 *   targets: ReturnType<typeof import('../targets/index.js').purgeTargets> }} deps
 */
export function createBatchPurge({ redis, config, logger, metrics, targets }) {
  /** One target's work, timed and retried. @param {string} target @param {() => Promise<void>} work */
  function step(target, work) {
    const timed = async () => {
      const end = metrics.duration.startTimer({ target });
      try {
        await work();
        end({ outcome: 'ok' });
      } catch (err) {
        end({ outcome: 'error' });
        throw err;
      }
    };
    const onRetry = (/** @type {unknown} */ err, /** @type {number} */ attempt) => {
      metrics.retries.inc({ target });
      logger.warn({ target, attempt, err: /** @type {Error} */ (err).message }, 'purge target failed, retrying');
    };
    const backoff = { baseMs: config.PURGE_RETRY_BASE_MS, maxMs: config.PURGE_RETRY_MAX_MS };
    return retry(timed, { attempts: config.PURGE_MAX_ATTEMPTS, ...backoff, onRetry }).catch((err) => {
      throw new TargetError(target, err);
    });
  }

  /**
   * A batch's takedowns: what they cover, once every live node enforces them (see settle).
   * @param {import('../takedown-purge.js').TakedownEvent[]} events
   * @returns {Promise<import('../takedown-purge.js').TakedownTargets>}
   */
  async function takedowns(events) {
    /** @type {import('../takedown-purge.js').TakedownTargets} */
    let covered = { sources: new Map(), accounts: new Set(), version: 0 };
    if (!events.length) return covered;
    await step('takedown', async () => {
      covered = await takedownTargets(redis, events);
    });
    const end = metrics.takedownSettle.startTimer();
    const settled = await settle(redis, covered.version, {
      pollMs: config.TAKEDOWN_POLL_MS,
      timeoutMs: config.TAKEDOWN_SETTLE_TIMEOUT_MS,
    }).catch(() => false);
    end();
    if (!settled) logger.warn({ version: covered.version }, 'takedown purged before every node confirmed the list');
    return covered;
  }

  /**
   * Originals whose stored bytes changed (scrub-store): out of every cache, under every path they were
   * served, added to what the takedowns cover. @param {Record<string, string>[]} events
   * @param {import('../takedown-purge.js').TakedownTargets} covered
   */
  async function changedOriginals(events, covered) {
    const changed = events
      .filter((fields) => fields.type === 'changed' && isUploadKey(fields.key || ''))
      .map((fields) => fields.key);
    if (!changed.length) return changed;
    await step('origin', async () => {
      for (const [key, paths] of await servedPaths(redis, changed))
        covered.sources.set(key, [...new Set([...(covered.sources.get(key) || []), `/${key}`, ...paths])]);
    });
    return changed;
  }

  /** @param {import('./stream.js').StreamEntry[]} entries */
  return async function purgeBatch(entries) {
    const kinds = coalesce(entries);
    const events = entries.map(([, fields]) => fieldsOf(fields));
    const covered = await takedowns(events.filter((fields) => fields.type === 'takedown').map(takedownEvent));
    const changed = await changedOriginals(events, covered);
    for (const account of covered.accounts) kinds.set(account, 'both');
    /** @type {import('../targets/index.js').PurgeBatch} */
    const batch = {
      kinds,
      tags: [...covered.sources.keys()].map((id) => `img:${id}`),
      sources: covered.sources,
      changed,
    };
    for (const target of targets) if (target.wants(batch)) await step(target.name, () => target.purge(batch));
  };
}
