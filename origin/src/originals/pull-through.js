// Uploads this store lacks, pulled from the image hosts an operator switches over from (UPSTREAM_IMAGE_HOSTS,
// e.g. https://images.hive.blog): a Hive upload key is a content address (sha256 of "ImageSigningChallenge" and
// the bytes), so a copy fetched from anywhere is checked against its key and stored only if its bytes make
// it. Each upstream is asked in turn under the limits of every remote fetch (size, time, the SSRF rules), at
// most UPSTREAM_CONCURRENCY at once and not while its circuit breaker is open, so a slow or dead upstream
// costs a fast answer and none of the origin's transform slots. A key every upstream lacks is remembered a
// short while (UPSTREAM_MISSING_TTL_S: an upstream can gain it). What is stored is scrubbed as an upload is
// (scrub/stored.js).
import fs from 'node:fs/promises';
import { HttpError } from '@stack/lib';
import { scrubbed } from '../scrub/stored.js';
import { digestsOf } from '../store/record.js';
import { probe } from '../pipeline/index.js';

/**
 * @typedef {{ base: string, running: number, failures: number, openUntil: number }} Upstream
 * @typedef {'stored' | 'missing' | 'mismatch' | 'error' | 'busy' | 'open'} Outcome
 */

/**
 * @param {{ config: import('@stack/lib/src/config-types.js').OriginConfig, store: import('../store/index.js').Store, fetcher: ReturnType<typeof import('./fetch.js').createFetcher>,
 *   failures: import('../cache/failures.js').FailureCache, metrics: import('../metrics.js').OriginMetrics, logger: import('pino').Logger }} deps
 */
export function createPullThrough({ config, store, fetcher, failures, metrics, logger }) {
  /** @type {Upstream[]} */
  const upstreams = config.UPSTREAM_IMAGE_HOSTS.map((/** @type {string} */ base) => ({
    base,
    running: 0,
    failures: 0,
    openUntil: 0,
  }));
  const limits = {
    maxPixels: config.MAX_INPUT_PIXELS,
    maxFrames: config.MAX_FRAMES,
    heic: config.HEIC_DECODE,
    animations: true,
  };

  /**
   * One upstream's copy of `key` into `temp`, checked against the key. @param {Upstream} upstream
   * @param {string} key @param {string} temp @returns {Promise<Outcome>}
   */
  async function askOne(upstream, key, temp) {
    if (upstream.openUntil > Date.now()) return 'open';
    if (upstream.running >= config.UPSTREAM_CONCURRENCY) return 'busy';
    upstream.running += 1;
    const end = metrics.pullDuration.startTimer({ upstream: upstream.base });
    try {
      await fetcher.fetchTo(`${upstream.base}/${key}/image`, temp);
      upstream.failures = 0;
      if ((await digestsOf(temp)).key !== key) {
        logger.warn(
          { key, upstream: upstream.base },
          'upstream answered bytes that do not make the key: refused, nothing stored',
        );
        return 'mismatch';
      }
      return 'stored';
    } catch (err) {
      const status = /** @type {HttpError} */ (err).status;
      if (status === 404) return 'missing';
      upstream.failures += 1;
      if (upstream.failures >= config.UPSTREAM_BREAKER_FAILURES) {
        upstream.openUntil = Date.now() + config.UPSTREAM_BREAKER_COOLDOWN_MS;
        upstream.failures = 0;
        logger.warn(
          { upstream: upstream.base },
          'upstream image host failing: not asked for UPSTREAM_BREAKER_COOLDOWN_MS',
        );
      }
      return 'error';
    } finally {
      upstream.running -= 1;
      end();
    }
  }

  /**
   * The stored file of `key`, pulled from the first upstream that has it (called once per key at a time:
   * the caller's single flight). 404 when every upstream lacks it, 502 when those that answered lied, 503 when
   * one could not be asked. @param {string} key @returns {Promise<{ path: string, pulledFrom?: string }>}
   */
  async function pull(key) {
    const remembered = await failures.get(`upstream:${key}`);
    if (remembered) throw remembered;
    const temp = store.tempPath();
    /** @type {Outcome[]} */
    const outcomes = [];
    try {
      for (const upstream of upstreams) {
        const outcome = await askOne(upstream, key, temp);
        metrics.pulls.inc({ upstream: upstream.base, result: outcome });
        outcomes.push(outcome);
        if (outcome !== 'stored') {
          await fs.rm(temp, { force: true });
          continue;
        }
        const info = await probe(temp, limits);
        const stored = await scrubbed(
          { config, metrics, logger },
          temp,
          info,
          key,
          Buffer.from((await digestsOf(temp)).sha256, 'hex'),
        );
        await store.put(key, stored.path, stored.record);
        logger.info({ key, upstream: upstream.base }, 'upload pulled through from an upstream image host');
        const found = await store.stat(key);
        if (!found) throw new HttpError(503, 'store_unavailable', {}, { 'Retry-After': '5' });
        return { path: found.path, pulledFrom: upstream.base };
      }
    } finally {
      await fs.rm(temp, { force: true });
      await fs.rm(`${temp}.scrubbed`, { force: true });
    }
    if (outcomes.every((outcome) => outcome === 'missing')) {
      const missing = new HttpError(404, 'not_found', { key, upstreams: upstreams.length });
      await failures.set(`upstream:${key}`, missing, false, config.UPSTREAM_MISSING_TTL_S);
      throw missing;
    }
    if (outcomes.includes('mismatch') && outcomes.every((outcome) => outcome === 'mismatch' || outcome === 'missing')) {
      throw new HttpError(502, 'upstream_mismatch', { key, reason: "the upstream's bytes do not make the key" });
    }
    throw new HttpError(503, 'upstream_unavailable', { key }, { 'Retry-After': '10' });
  }

  return { enabled: upstreams.length > 0, pull };
}
/** @typedef {ReturnType<typeof createPullThrough>} PullThrough */
