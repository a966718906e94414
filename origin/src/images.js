// The variants side of the origin: source → original (originals/) → variant (the result cache), made once
// however many ask (single flight), within each request's deadline, degraded under a deep queue, the AVIF
// behind a first answer made in the background, a warmer's only on idle capacity. Each request is a job
// (variant/job.js) made by variant/make.js; variant/warm.js admits the warmer's.
import {
  backgroundEncodes,
  resolveSource as resolveSourceOf,
  transformWorkers,
  unwrapOptions,
  usableCores,
  warmTransforms,
} from '@stack/lib';
import { createBackground } from './background.js';
import { byAnswerDeadline, newJob } from './variant/job.js';
import { formatOfExt, variantKey } from './variant/keys.js';
import { createMaker } from './variant/make.js';
import { createWarmGate } from './variant/warm.js';
import { createWorkerPool } from './workers/pool.js';
import { createTransformThreads, transformLoops } from './workers/threads.js';

/**
 * @typedef {import('@stack/lib/src/sources.js').Source} Source
 * @typedef {import('./options.js').Want} Want
 * @typedef {import('./variant/job.js').Timings} Timings
 * @typedef {import('./variant/make.js').Variant} Variant
 */

/**
 * @param {{ config: import('@stack/lib/src/config-types.js').OriginConfig, store: import('./store/index.js').Store,
 *   originals: import('./originals/index.js').Originals, variants: import('./cache/pack-cache.js').PackCache,
 *   queue: import('./queue.js').TransformQueue, flight: ReturnType<typeof import('./single-flight.js').createSingleFlight>,
 *   metrics: import('./metrics.js').OriginMetrics, logger: import('pino').Logger, codecs?: import('./codecs.js').SystemCodecs }} deps
 */
export function createImages(deps) {
  const { config, originals, variants, queue, flight, metrics, logger } = deps;
  // costly encodings nobody waits for: the AVIF behind a first answer in WebP
  const background = createBackground({
    queue,
    concurrency: backgroundEncodes(config),
    maxPending: config.BACKGROUND_ENCODES_MAX,
    onResult: (result, err) => {
      metrics.background.inc({ result });
      if (err) logger.warn({ err }, 'background encode failed');
    },
    onChange: (jobs) => metrics.backgroundJobs.set(jobs),
  });
  const onKill = () => metrics.workerKills.inc();
  const idleMs = config.TRANSFORM_WORKER_IDLE_S * 1000;
  const workers = createWorkerPool({
    size: transformWorkers(config),
    nice: config.TRANSFORM_NICE,
    arenas: config.TRANSFORM_WORKER_ARENAS,
    systemCodecs: config.SYSTEM_CODECS,
    idleMs,
    onKill,
  });
  // a warmer's transforms run in processes of their own at the lowest CPU priority (WARM_NICE, 19): the kernel
  // gives a reader's transform (TRANSFORM_NICE) the CPU first, so warming takes what readers leave
  const warmWorkers = createWorkerPool({
    size: warmTransforms(config),
    nice: config.WARM_NICE,
    arenas: config.TRANSFORM_WORKER_ARENAS,
    systemCodecs: config.SYSTEM_CODECS,
    idleMs,
    onKill,
    onHeld: (bytes) => metrics.keptPixelsBytes.set({ holder: 'warm_workers' }, bytes),
  });
  metrics.watchWorkers({ readers: workers, warm: warmWorkers });
  const loops = transformLoops(config.TRANSFORM_LOOPS, usableCores());
  const transformThreads =
    loops > 0 ? createTransformThreads({ count: loops, systemCodecs: config.SYSTEM_CODECS }) : null;
  const warmGate = createWarmGate({ config, queue, metrics });
  const requestTimeoutS = config.REQUEST_TIMEOUT_S;
  const maker = createMaker({
    ...deps,
    workers,
    warmWorkers,
    transformThreads,
    // the AVIF a first answer fell back from, made later on idle capacity; the next request after it lands
    // gets it from the result cache
    encodeLater: ({ source, want, key }) =>
      background.add(key, () =>
        flight('background', key, async () => {
          if (!variants.get(key)) await maker.make(newJob({ source, want, key, mode: 'background', requestTimeoutS }));
        }),
      ),
  });
  const unwrap = unwrapOptions(config);

  /**
   * A variant from the cache, or made now (one transform per key however many ask) by REQUEST_TIMEOUT_S,
   * whatever a fetch, the queue and a transform add up to; a warmer's (`warm`) only on idle capacity.
   * @param {Source} source @param {Want} want @param {{ warm?: boolean }} [options] @returns {Promise<Variant>}
   */
  async function variant(source, want, { warm = false } = {}) {
    const key = variantKey(source, want);
    const cached = variants.get(key);
    metrics.cache.inc({ level: 'variant', result: cached ? 'hit' : 'miss' });
    if (cached) {
      const { format, asOriginal } = formatOfExt(cached.ext);
      return {
        variantKey: key,
        format: /** @type {any} */ (format),
        degraded: false,
        cached,
        timings: {},
        asOriginal: asOriginal || undefined,
      };
    }
    const job = newJob({ source, want, key, mode: warm ? 'warm' : 'reader', requestTimeoutS });
    const inFlight = flight.has('transform', key);
    if (warm) {
      warmGate.admit({ inFlight });
      return byAnswerDeadline(
        job,
        flight('transform', key, () => makeWarm(job)),
      );
    }
    const made = () =>
      byAnswerDeadline(
        job,
        flight('transform', key, () => maker.make(job)),
      );
    if (!inFlight) return made();
    // joining a transform in flight is waiting like a queued request, so it holds a place in the queue
    // (refused when it is full): otherwise duplicates, which varnish sends while an earlier 503 for the same
    // URL is hit-for-miss, pile up on the origin's connections until haproxy queues everything behind them
    const release = queue.reserve();
    try {
      return await made();
    } finally {
      release();
    }
  }

  /** A warmer's variant, its original then kept in the warm archive. @param {import('./variant/job.js').VariantJob} job */
  async function makeWarm(job) {
    const made = await maker.make(job);
    await originals.keep(job.source);
    return made;
  }

  /**
   * A cached variant whose bytes could not be read (its segment deleted or cut by hand, a disk swapped): out
   * of the index, so the next request makes it again instead of failing until a restart. @param {string} key
   */
  function forgetVariant(key) {
    variants.forget(key);
    variants.replaceLostActive();
    logger.warn({ key }, 'cached variant missing on disk: made again');
  }

  /**
   * Drops a taken-down source from this origin's caches: its fetched original and its variants for these
   * wants (the sizes and formats it was served in). @param {Source} source @param {Want[]} wants
   */
  async function dropSource(source, wants) {
    for (const want of wants) variants.forget(variantKey(source, want));
    maker.forgetPixels(source.id);
    await originals.drop(source);
  }

  return {
    /** Where a proxied URL really points: our own upload, or the original behind another image proxy's URL. @param {string} text */
    resolveSource: (text) => resolveSourceOf(text, unwrap),
    variant,
    /** A cached variant's bytes. @param {import('./cache/pack-cache.js').PackEntry} entry */
    readCached: (entry) => variants.read(entry),
    /** Where a cached variant's bytes are in the cache's files (range and conditional requests). @param {import('./cache/pack-cache.js').PackEntry} entry */
    cachedFile: (entry) => variants.location(entry),
    forgetVariant,
    dropSource,
    upload: originals.upload,
    close: () => {
      workers.close();
      warmWorkers.close();
      transformThreads?.close();
      warmGate.stop();
    },
  };
}
