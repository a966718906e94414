// The originals side of the pipeline, apart from the variants (images.js): where a source's original file
// comes from (an upload from the store or pulled through from an upstream image host, a remote original from
// the originals cache, the archive of warmed posts or a fetch behind the failure cache), what its header said
// (probed once per file), and how it is forgotten (a file gone from disk, a takedown).
import fs from 'node:fs/promises';
import { LRUCache } from 'lru-cache';
import { HttpError, storageFull } from '@stack/lib';
import { FetchError } from './fetch.js';
import { probe } from '../pipeline/index.js';

/** @typedef {import('@stack/lib/src/sources.js').Source} Source */

/**
 * @param {{ config: import('@stack/lib/src/config-types.js').OriginConfig, store: import('../store/index.js').Store,
 *   cache: import('../cache/disk-lru.js').DiskLru, failures: import('../cache/failures.js').FailureCache,
 *   fetcher: ReturnType<typeof import('./fetch.js').createFetcher>, flight: ReturnType<typeof import('../single-flight.js').createSingleFlight>,
 *   metrics: import('../metrics.js').OriginMetrics, logger: import('pino').Logger,
 *   pullThrough?: import('./pull-through.js').PullThrough, archive?: import('./archive.js').Archive }} deps
 */
export function createOriginals({
  config,
  store,
  cache,
  failures,
  fetcher,
  flight,
  metrics,
  logger,
  pullThrough,
  archive,
}) {
  /**
   * What the header of each original said (size, frames, profile): a file under a path never changes
   * (uploads are content-addressed; a refetched original is probed again on arrival), so each variant
   * after the first skips reading it. @type {LRUCache<string, import('../pipeline/index.js').SourceInfo>}
   */
  const probed = new LRUCache({ max: 10000 });
  // an animation past the budgets is read, not refused: the plan makes what of it fits (images.hive.blog
  // serves a long GIF at 0x0 untouched)
  const limits = {
    maxPixels: config.MAX_INPUT_PIXELS,
    maxFrames: config.MAX_FRAMES,
    heic: config.HEIC_DECODE,
    animations: true,
  };

  /**
   * An upload's file: the store's, or pulled through from an upstream image host (UPSTREAM_IMAGE_HOSTS), once
   * per key however many ask; `pulledFrom` names the upstream when this request's flight pulled it.
   * @param {string} key @returns {Promise<{ path: string, pulledFrom?: string }>}
   */
  async function upload(key) {
    const found = await store.stat(key);
    if (found) return { path: found.path };
    if (!pullThrough?.enabled) throw new HttpError(404, 'not_found', { key });
    return flight('pull', key, () => pullThrough.pull(key));
  }

  /** @param {Source & { url: string }} source */
  async function fetchOriginal(source) {
    const remembered = await failures.get(source.id);
    metrics.cache.inc({ level: 'failure', result: remembered ? 'hit' : 'miss' });
    if (remembered) throw remembered;
    const temp = cache.tempPath();
    const end = metrics.fetchDuration.startTimer();
    try {
      const { bytes } = await fetcher.fetchTo(source.url, temp);
      metrics.fetches.inc();
      metrics.bytes.inc({ direction: 'in' }, bytes);
      const info = await probe(temp, limits);
      const file = await cache.putFile(source.id, 'bin', temp);
      probed.set(file, info);
      return file;
    } catch (err) {
      await fs.rm(temp, { force: true });
      const httpError = err instanceof HttpError ? err : (storageFull(err) ?? new HttpError(502, 'upstream_error'));
      metrics.fetchErrors.inc({ reason: httpError.name });
      // what the fetch calls transient (a timeout, a 5xx) is remembered briefly; the rest (a 404, not an image)
      // long; our own disk full, not at all (the source is fine)
      if (httpError.status !== 507)
        await failures.set(source.id, httpError, !(err instanceof FetchError) || err.permanent);
      throw httpError;
    } finally {
      end();
    }
  }

  return {
    upload,
    /**
     * A source's original file: an upload, or a remote original from the cache, the archive, or fetched
     * (once however many ask; its time in `timings.fetch`).
     * @param {Source} source @param {{ fetch?: number }} timings @returns {Promise<string>}
     */
    async file(source, timings) {
      if (source.uploadKey) return (await upload(source.uploadKey)).path;
      const cached = cache.get(source.id);
      metrics.cache.inc({ level: 'original', result: cached ? 'hit' : 'miss' });
      if (cached) return cached.path;
      // a warmed post's original, kept whatever became of its host
      const kept = await archive?.get(source.id);
      if (kept) return kept;
      const started = performance.now();
      const file = await flight('fetch', source.id, () =>
        fetchOriginal(/** @type {Source & { url: string }} */ (source)),
      );
      timings.fetch = performance.now() - started;
      return file;
    },
    /** What the header of `file` said, read once. @param {string} file @returns {Promise<import('../pipeline/index.js').SourceInfo>} */
    async info(file) {
      const known = probed.get(file);
      if (known) return known;
      const info = await probe(file, limits);
      probed.set(file, info);
      return info;
    },
    /** A cached original whose file is gone (deleted by hand, a disk swapped): fetched again next time. @param {Source} source */
    forgetCached(source) {
      const cached = cache.get(source.id);
      if (cached) probed.delete(cached.path);
      cache.forget(source.id);
      logger.warn({ id: source.id }, 'cached original missing on disk: fetched again');
    },
    /** A warmed remote original, kept in the archive (where there is one). @param {Source} source */
    async keep(source) {
      const fetched = source.uploadKey ? null : cache.get(source.id);
      if (fetched)
        await archive
          ?.keep(source.id, fetched.path)
          .catch((err) => logger.warn({ err: err.message, id: source.id }, 'warmed original not kept'));
    },
    /** A taken-down remote original, out of the cache and the archive. @param {Source} source */
    async drop(source) {
      if (!source.uploadKey) await Promise.all([cache.remove(source.id), archive?.remove(source.id)]);
    },
  };
}
/** @typedef {ReturnType<typeof createOriginals>} Originals */
