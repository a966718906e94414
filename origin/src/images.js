import fs from 'node:fs/promises';
import { HttpError, isGone, resolveSource as resolveSourceOf, sha256Hex, unwrapOptions, usableCores } from '@stack/lib';
import { createBackground } from './background.js';
import { originalAnswers, plan, sourceFormat, threadsPerImage, transform, transformTimeout } from './pipeline/index.js';
import { watchCpuPressure } from './pressure.js';
import { createWorkerPool } from './workers.js';

const EXTENSIONS = { jpeg: 'jpg', png: 'png', webp: 'webp', gif: 'gif', avif: 'avif' };
/**
 * The result cache's extension of an animation's original kept as its variant (past the budgets: too costly
 * to transform), so a later answer from the cache says so as the first did.
 */
const PAST_BUDGET = { gif: 'agif', webp: 'awbp' };
/** @param {string} ext */
export const formatOfExt = (ext) => (ext === 'jpg' ? 'jpeg' : ext === 'agif' ? 'gif' : ext === 'awbp' ? 'webp' : ext);
/** Why a variant is its original's bytes: `animation_past_budget`, or '' for a variant made. */
export const ANIMATION_PAST_BUDGET = 'animation_past_budget';

/**
 * @typedef {import('@stack/lib/src/sources.js').Source} Source
 * @typedef {import('./options.js').Want} Want
 * @typedef {{ fetch?: number, queue?: number, transform?: number }} Timings
 * @typedef {{ variantKey: string, format: import('./pipeline/index.js').OutputFormat, degraded: boolean, firstAnswer?: boolean,
 *   cached?: import('./cache/pack-cache.js').PackEntry, data?: Buffer, timings: Timings, asOriginal?: string }} Variant
 *   a variant made now (`data`) or from the result cache (`cached`: see readCached, cachedFile); asOriginal: why it
 *   is the original's bytes, when an animation was too costly to transform
 * @typedef {'reader' | 'background' | 'warm'} MakeMode who a variant is made for: a reader (who may get a first
 *   answer instead of an AVIF); the background encode of what a first answer fell back from; a warmer (in the
 *   queue's later lane, in a worker at the lowest CPU priority)
 */

/**
 * The work, or a 503 at its deadline (REQUEST_TIMEOUT_S, under haproxy's server timeout: the origin answers
 * first, cleanly). The work goes on; what it makes is cached for the next request.
 * @template T @param {Promise<T>} work @param {number} seconds @returns {Promise<T>}
 */
function withinDeadline(work, seconds) {
  /** @type {NodeJS.Timeout | undefined} */
  let timer;
  const deadline = new Promise((_resolve, reject) => {
    timer = setTimeout(
      () => reject(new HttpError(503, 'request_timeout', { limit_s: seconds }, { 'Retry-After': '5' })),
      seconds * 1000,
    );
  });
  work.catch(() => {}); // answered by the deadline already
  return /** @type {Promise<T>} */ (Promise.race([work, deadline])).finally(() => clearTimeout(timer));
}

/**
 * The variants side of the pipeline: source → original (originals.js) → variant (the result cache), made
 * once however many ask, degraded under a deep queue, the AVIF behind a first answer made in the background.
 * @param {{ config: import('@stack/lib/src/config-types.js').OriginConfig, store: import('./store/index.js').Store,
 *   originals: import('./originals.js').Originals, variants: import('./cache/pack-cache.js').PackCache,
 *   queue: import('./queue.js').TransformQueue, flight: ReturnType<typeof import('./single-flight.js').createSingleFlight>,
 *   metrics: import('./metrics.js').OriginMetrics, logger: import('pino').Logger, codecs?: import('./codecs.js').SystemCodecs }} deps
 */
export function createImages(deps) {
  const { config, store, originals, variants, queue, flight, metrics, logger, codecs } = deps;
  const cores = usableCores();
  // costly encodings nobody waits for: the AVIF behind a first answer in WebP
  const background = createBackground({
    queue,
    maxPending: config.BACKGROUND_ENCODES_MAX,
    onResult: (result, err) => {
      metrics.background.inc({ result });
      if (err) logger.warn({ err }, 'background encode failed');
    },
    onChange: (jobs) => metrics.backgroundJobs.set(jobs),
  });
  const budgets = {
    maxPixels: config.MAX_OUTPUT_PIXELS,
    avifPixels: config.AVIF_MAX_PIXELS,
    maxFrames: config.MAX_FRAMES,
    maxInputPixels: config.MAX_INPUT_PIXELS,
  };
  // what a worker process makes (it can be stopped at the deadline): every AVIF, every HEIC source (libheif
  // and libde265 parse it there), and any large variant
  const workers = createWorkerPool({
    keep: cores,
    nice: config.TRANSFORM_NICE,
    onKill: () => metrics.workerKills.inc(),
  });
  // a warmer's transforms run in a process of their own at the lowest CPU priority: the kernel gives a
  // reader's transform (TRANSFORM_NICE) the CPU first, so warming takes what readers leave
  const warmWorkers = createWorkerPool({ keep: 1, nice: 19, onKill: () => metrics.workerKills.inc() });
  // with WARM_MAX_CPU_PRESSURE: a warm transform starts only while the machine's CPU is that idle (PSI)
  const pressure = config.WARM_MAX_CPU_PRESSURE > 0 ? watchCpuPressure() : { share: () => 0, stop: () => {} };
  const inWorker = (/** @type {import('./pipeline/index.js').Plan} */ p) =>
    p.format === 'avif' || p.heic || p.pixels > config.TRANSFORM_WORKER_PIXELS;
  const encoder = {
    maxPixels: config.MAX_INPUT_PIXELS,
    timeoutS: config.TRANSFORM_TIMEOUT_S,
    jpegQuality: config.JPEG_QUALITY,
    jpegProgressive: config.JPEG_PROGRESSIVE,
    jpegTrellis: config.JPEG_TRELLIS,
    webpQuality: config.WEBP_QUALITY,
    webpEffort: config.WEBP_EFFORT,
    avifQuality: config.AVIF_QUALITY,
    avifEffort: config.AVIF_EFFORT,
    codecs,
  };
  // a worker's (sharp alone: the system codecs' handles do not cross processes)
  const { codecs: _unused, ...plainEncoder } = encoder;

  const unwrap = unwrapOptions(config);
  /** Where a proxied URL really points: our own upload, or the original behind another image proxy's URL. @param {string} text */
  const resolveSource = (text) => resolveSourceOf(text, unwrap);

  /** @param {Source} source @param {Want} want */
  function variantKey(source, want) {
    // a negotiated answer depends on the Accept class (match without negotiation keeps its old key)
    let format = want.format === 'auto' || want.negotiated ? `${want.format}-${want.accept}` : want.format;
    if (want.blur) format = 'blur';
    return sha256Hex(JSON.stringify([source.id, want.width, want.height, want.mode, format]));
  }

  /**
   * A variant from the cache, or made now (one transform per key however many ask); a warmer's (`warm`)
   * only on idle capacity (warmVariant). @param {Source} source @param {Want} want
   * @param {{ warm?: boolean }} [options] @returns {Promise<Variant>}
   */
  async function variant(source, want, { warm = false } = {}) {
    const key = variantKey(source, want);
    const cached = variants.get(key);
    metrics.cache.inc({ level: 'variant', result: cached ? 'hit' : 'miss' });
    if (cached)
      return {
        variantKey: key,
        format: /** @type {any} */ (formatOfExt(cached.ext)),
        degraded: false,
        cached,
        timings: {},
        asOriginal: Object.values(PAST_BUDGET).includes(cached.ext) ? ANIMATION_PAST_BUDGET : undefined,
      };
    if (warm) return warmVariant(source, want, key);
    // a miss answers by REQUEST_TIMEOUT_S, whatever a fetch, the queue and a transform add up to
    const made = () =>
      withinDeadline(
        flight('transform', key, () => makeVariant(source, want, key)),
        config.REQUEST_TIMEOUT_S,
      );
    if (!flight.has('transform', key)) return made();
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

  /**
   * A variant a warmer asks for before any reader (X-Warm): made in full (no first-answer fallback) in the
   * queue's later lane, behind every reader's transform and beside their slots, in a worker at the lowest CPU
   * priority; while the queue is deep (TRANSFORM_DEGRADE_DEPTH) or that lane is full, a 429 the warmer
   * retries after.
   * @param {Source} source @param {Want} want @param {string} key @returns {Promise<Variant>}
   */
  function warmVariant(source, want, key) {
    const busy = flight.has('transform', key) ? null : warmBusy();
    if (busy) {
      metrics.warm.inc({ result: 'deferred' });
      throw new HttpError(429, 'warm_deferred', { reason: busy.reason }, { 'Retry-After': busy.retryAfter });
    }
    metrics.warm.inc({ result: 'made' });
    return withinDeadline(
      flight('transform', key, async () => {
        const made = await makeVariant(source, want, key, 'warm');
        await originals.keep(source);
        return made;
      }),
      config.REQUEST_TIMEOUT_S,
    );
  }

  /** Why a warm transform may not start now (null when it may): readers' queue, the warm lane, the CPU. */
  function warmBusy() {
    if (queue.depth >= config.TRANSFORM_DEGRADE_DEPTH || !queue.laterHasRoom)
      return { reason: 'the transform queue is busy with readers', retryAfter: '2' };
    // the pressure reads 0 without WARM_MAX_CPU_PRESSURE (no gate)
    if (pressure.share() * 100 > config.WARM_MAX_CPU_PRESSURE)
      return { reason: 'the CPU is busy (pressure past WARM_MAX_CPU_PRESSURE)', retryAfter: '1' };
    return null;
  }

  /**
   * A cached original whose file is gone (deleted by hand, a disk swapped) is fetched or read again, once, instead
   * of failing as a bad image.
   * @param {Source} source @param {Want} want @param {string} key @param {MakeMode} [mode] @returns {Promise<Variant>}
   */
  async function makeVariant(source, want, key, mode = 'reader') {
    try {
      return await makeVariantOnce(source, want, key, mode);
    } catch (err) {
      if (!isGone(err)) throw err;
      // an upload's own file (STORE=fs) is the upload: gone is gone; a copy of the bucket's is read again
      if (source.uploadKey && !store.copies) throw err;
      originals.forgetCached(source);
      return makeVariantOnce(source, want, key, mode);
    }
  }

  /**
   * The AVIF a first answer fell back from, made later on idle capacity (see background.js); the next
   * request after it lands gets it from the result cache. @param {Source} source @param {Want} want @param {string} key
   */
  function encodeLater(source, want, key) {
    background.add(key, () =>
      flight('background', key, async () => {
        if (!variants.get(key)) await makeVariant(source, want, key, 'background');
      }),
    );
  }

  /**
   * The cheaper encoding instead of AVIF: under a deep queue (degraded), or as the first answer to
   * format=auto (AUTO_AVIF_FIRST_ANSWER), which is never made to wait for an AVIF encode.
   * @param {Want} want @param {MakeMode} mode
   */
  function fallbackReason(want, mode) {
    if (queue.depth >= config.TRANSFORM_DEGRADE_DEPTH) return 'queue';
    if (mode === 'reader' && want.accept === 'avif' && config.AUTO_AVIF_FIRST_ANSWER) return 'first_answer';
    return '';
  }

  /**
   * @param {Source} source @param {Want} want @param {string} key @param {MakeMode} mode @returns {Promise<Variant>}
   */
  async function makeVariantOnce(source, want, key, mode) {
    const warm = mode === 'warm';
    // refused before any fetch, stat or probe: under overload a refusal must stay cheap
    if (queue.full) throw queue.overloaded();
    /** @type {Timings} */
    const timings = {};
    const file = await originals.file(source, timings);
    const release = queue.reserve();
    /** @type {ReturnType<typeof plan>} */
    let p;
    /** @type {import('./pipeline/index.js').SourceInfo} */
    let info;
    const reason = fallbackReason(want, mode);
    try {
      info = await originals.info(file);
      p = plan(info, want, Boolean(reason), budgets);
    } catch (err) {
      release();
      throw err;
    }
    if (p.passthrough) {
      release();
      return asOriginal(info);
    }
    // A degraded answer is stored under the key of what it really is (a WebP), never under the avif/auto key.
    const storeKey = p.degraded ? variantKey(source, { ...want, format: 'webp' }) : key;
    if (p.degraded) {
      if (reason === 'first_answer') metrics.fallbacks.inc();
      encodeLater(source, want, key);
      const cached = variants.get(storeKey);
      if (cached) {
        release();
        return {
          variantKey: key,
          format: 'webp',
          degraded: true,
          firstAnswer: reason === 'first_answer',
          cached,
          timings,
        };
      }
    }
    const small = Math.max(want.width || 0, want.height || 0) <= config.SMALL_BOX && Boolean(want.width || want.height);
    // libvips checks its timeout while it computes pixels, not inside an encoder: the answer is a 503 at the
    // timeout. A costly transform runs in a worker, killed then, its slot free at once; a cheap one in this
    // process keeps its slot until it really ends (the bound on concurrent transforms holds) and its result
    // still goes to the result cache
    /** @type {(err: Error) => void} */
    let expire = () => {};
    const expired = new Promise((_resolve, reject) => {
      expire = reject;
    });
    const done = queue
      .run(
        async () => {
          const started = performance.now();
          const timer = setTimeout(() => expire(transformTimeout()), config.TRANSFORM_TIMEOUT_S * 1000);
          try {
            // a warmer's on one thread, at the lowest priority: a reader's transform that starts meanwhile gets the CPU
            const threads = warm ? 1 : config.TRANSFORM_THREADS || threadsPerImage(queue.running, cores);
            const output =
              warm || inWorker(p)
                ? await (warm ? warmWorkers : workers).run(
                    file,
                    p,
                    { ...plainEncoder, threads },
                    config.TRANSFORM_TIMEOUT_S * 1000,
                  )
                : await transform(file, p, { ...encoder, threads });
            timings.transform = performance.now() - started;
            return output;
          } finally {
            clearTimeout(timer);
          }
        },
        small,
        release,
        warm,
      )
      .then(async ({ value, waitMs }) => {
        timings.queue = waitMs;
        metrics.queueWait.observe(waitMs / 1000);
        metrics.transformDuration.observe({ format: p.format }, /** @type {number} */ (timings.transform) / 1000);
        metrics.transforms.inc({ format: p.format });
        metrics.codecs.inc(value.codecs);
        if (p.degraded && reason === 'queue') metrics.degraded.inc();
        // never bigger than the source: a variant of the original's own size that came out larger is the
        // original, when the client takes its format (decided once: the result cache keeps the answer)
        const size = p.fits && originalAnswers(info, want) ? (await fs.stat(file)).size : Infinity;
        if (value.data.length > size) {
          metrics.originalAnswers.inc({ reason: 'smaller' });
          const bytes = await fs.readFile(file);
          const format = /** @type {import('./pipeline/index.js').OutputFormat} */ (sourceFormat(info));
          keep(storeKey, format, bytes);
          return { ...value, data: bytes, format };
        }
        keep(storeKey, p.format, value.data);
        return { ...value, format: p.format };
      });
    done.catch(() => {}); // answered already when it expired
    const value = await Promise.race([done, expired]);
    return {
      variantKey: key,
      format: value.format,
      degraded: p.degraded,
      firstAnswer: p.degraded && reason === 'first_answer',
      data: value.data,
      timings,
    };

    /** The original's bytes as the variant (an animation past the budgets that fits the request). @param {import('./pipeline/index.js').SourceInfo} source */
    async function asOriginal(source) {
      metrics.originalAnswers.inc({ reason: ANIMATION_PAST_BUDGET });
      const bytes = await fs.readFile(file);
      const format = /** @type {'gif' | 'webp'} */ (sourceFormat(source));
      keep(key, format, bytes, PAST_BUDGET[format]);
      return { variantKey: key, format, degraded: false, data: bytes, timings, asOriginal: ANIMATION_PAST_BUDGET };
    }
  }

  /**
   * Appends a variant to the result cache (one write into the page cache: the answer waits for nothing).
   * @param {string} key @param {import('./pipeline/index.js').OutputFormat} format @param {Buffer} data
   * @param {string} [ext] the format's extension unless given (PAST_BUDGET)
   */
  function keep(key, format, data, ext = EXTENSIONS[format]) {
    try {
      variants.put(key, ext, data);
    } catch (err) {
      logger.warn({ err, key }, 'variant not cached');
    }
  }

  /** A cached variant's bytes. @param {import('./cache/pack-cache.js').PackEntry} entry */
  function readCached(entry) {
    return variants.read(entry);
  }

  /** Where a cached variant's bytes are in the cache's files (for range and conditional requests). @param {import('./cache/pack-cache.js').PackEntry} entry */
  function cachedFile(entry) {
    return variants.location(entry);
  }

  /**
   * A cached variant whose bytes could not be read (its segment deleted or cut by hand, a disk swapped): out
   * of the index, so the next request makes it again instead of failing until a restart. @param {string} key
   */
  function forgetVariant(key) {
    variants.forget(key);
    logger.warn({ key }, 'cached variant missing on disk: made again');
  }

  /**
   * Drops a taken-down source from this origin's caches: its fetched original and its variants for these
   * wants (the sizes and formats it was served in). @param {Source} source @param {Want[]} wants
   */
  async function dropSource(source, wants) {
    for (const want of wants) variants.forget(variantKey(source, want));
    await originals.drop(source);
  }

  return {
    resolveSource,
    variant,
    readCached,
    cachedFile,
    forgetVariant,
    dropSource,
    upload: originals.upload,
    close: () => {
      workers.close();
      warmWorkers.close();
      pressure.stop();
    },
  };
}
