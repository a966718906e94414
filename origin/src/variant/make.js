// Making one variant (a job: job.js): its original (originals.js), its plan, a place in the transform queue,
// the pipeline in this process or in a worker, and the answer kept in the result cache. In order:
// prepare → (the original as it is | a degraded answer already cached | transform in a slot) → keep.
import fs from 'node:fs/promises';
import { isGone, usableCores } from '@stack/lib';
import {
  originalAnswers,
  plan,
  sourceFormat,
  threadsPerImage,
  transform,
  transformTimeout,
} from '../pipeline/index.js';
import { byDeadline, msUntil } from './job.js';
import { ANIMATION_PAST_BUDGET, extensionOf, variantKey } from './keys.js';

/**
 * @typedef {import('./job.js').VariantJob} VariantJob
 * @typedef {import('../pipeline/index.js').OutputFormat} OutputFormat
 * @typedef {{ variantKey: string, format: OutputFormat, degraded: boolean, firstAnswer?: boolean,
 *   cached?: import('../cache/pack-cache.js').PackEntry, data?: Buffer, timings: import('./job.js').Timings, asOriginal?: string }} Variant
 *   a variant made now (`data`) or from the result cache (`cached`); asOriginal: why it is the original's bytes,
 *   when an animation was too costly to transform
 * @typedef {{ file: string, info: import('../pipeline/index.js').SourceInfo, plan: import('../pipeline/index.js').Plan,
 *   fallback: '' | 'queue' | 'first_answer', release: () => void }} Prepared
 *   fallback: why the plan is the cheaper encoding instead of AVIF; release: the queue place held meanwhile
 */

/**
 * @param {{ config: import('@stack/lib/src/config-types.js').OriginConfig, store: import('../store/index.js').Store,
 *   originals: import('../originals.js').Originals, variants: import('../cache/pack-cache.js').PackCache,
 *   queue: import('../queue.js').TransformQueue, metrics: import('../metrics.js').OriginMetrics, logger: import('pino').Logger,
 *   codecs?: import('../codecs.js').SystemCodecs, workers: import('../workers.js').WorkerPool,
 *   warmWorkers: import('../workers.js').WorkerPool, encodeLater: (job: VariantJob) => void }} deps
 *   encodeLater: the AVIF a first answer fell back from, queued for idle capacity (background.js)
 */
export function createMaker(deps) {
  const { config, store, originals, variants, queue, metrics, logger, codecs } = deps;
  const cores = usableCores();
  const budgets = {
    maxPixels: config.MAX_OUTPUT_PIXELS,
    avifPixels: config.AVIF_MAX_PIXELS,
    maxFrames: config.MAX_FRAMES,
    maxInputPixels: config.MAX_INPUT_PIXELS,
  };
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
  // what a worker process makes (it can be stopped at the deadline): every AVIF, every HEIC source (libheif
  // and libde265 parse it there), any large variant, and every warmer's
  const inWorker = (/** @type {VariantJob} */ job, /** @type {import('../pipeline/index.js').Plan} */ p) =>
    job.mode === 'warm' || p.format === 'avif' || Boolean(p.heic) || p.pixels > config.TRANSFORM_WORKER_PIXELS;

  /**
   * The job's variant. A cached original whose file is gone (deleted by hand, a disk swapped) is fetched or
   * read again, once, instead of failing as a bad image. @param {VariantJob} job @returns {Promise<Variant>}
   */
  async function make(job) {
    try {
      return await makeOnce(job);
    } catch (err) {
      if (!isGone(err)) throw err;
      // an upload's own file (STORE=fs) is the upload: gone is gone; a copy of the bucket's is read again
      if (job.source.uploadKey && !store.copies) throw err;
      originals.forgetCached(job.source);
      return makeOnce(job);
    }
  }

  /** @param {VariantJob} job @returns {Promise<Variant>} */
  async function makeOnce(job) {
    // refused before any fetch, stat or probe: under overload a refusal must stay cheap
    if (queue.full) throw queue.overloaded();
    const prepared = await prepare(job);
    if (prepared.plan.passthrough) {
      prepared.release();
      return asOriginal(job, prepared);
    }
    const degraded = prepared.plan.degraded ? degradedAnswer(job, prepared) : null;
    if (degraded) return degraded;
    const output = await transformInSlot(job, prepared);
    return {
      variantKey: job.key,
      format: output.format,
      degraded: prepared.plan.degraded,
      firstAnswer: prepared.plan.degraded && prepared.fallback === 'first_answer',
      data: output.data,
      timings: job.timings,
    };
  }

  /**
   * The original's file, its header and the plan, with a place held in the queue meanwhile (released on a
   * failure; handed to the slot otherwise). @param {VariantJob} job @returns {Promise<Prepared>}
   */
  async function prepare(job) {
    const file = await originals.file(job.source, job.timings);
    const release = queue.reserve();
    const fallback = fallbackReason(job);
    try {
      const info = await originals.info(file);
      return { file, info, plan: plan(info, job.want, Boolean(fallback), budgets), fallback, release };
    } catch (err) {
      release();
      throw err;
    }
  }

  /**
   * Why the cheaper encoding answers instead of AVIF: a deep queue (degraded), or format=auto's first answer
   * (AUTO_AVIF_FIRST_ANSWER), which never waits for an AVIF encode. @param {VariantJob} job
   */
  function fallbackReason({ want, mode }) {
    if (queue.depth >= config.TRANSFORM_DEGRADE_DEPTH) return 'queue';
    if (mode === 'reader' && want.accept === 'avif' && config.AUTO_AVIF_FIRST_ANSWER) return 'first_answer';
    return '';
  }

  /**
   * A degraded plan (WebP instead of AVIF): the AVIF queued for later, and the WebP from the result cache when
   * it is there (stored under the key of what it really is, never under the avif/auto key); null to make it.
   * @param {VariantJob} job @param {Prepared} prepared @returns {Variant | null}
   */
  function degradedAnswer(job, prepared) {
    const firstAnswer = prepared.fallback === 'first_answer';
    if (firstAnswer) metrics.fallbacks.inc();
    deps.encodeLater(job);
    const cached = variants.get(storeKeyOf(job, prepared));
    if (!cached) return null;
    prepared.release();
    return { variantKey: job.key, format: 'webp', degraded: true, firstAnswer, cached, timings: job.timings };
  }

  /** The key a made variant is kept under: a degraded one under the WebP's. @param {VariantJob} job @param {{ plan: Prepared['plan'] }} prepared */
  const storeKeyOf = (job, prepared) =>
    prepared.plan.degraded ? variantKey(job.source, { ...job.want, format: 'webp' }) : job.key;

  /**
   * The pipeline in a transform slot, by one deadline: TRANSFORM_TIMEOUT_S from the slot's start, read by every
   * stage (libvips' own timeout, the worker's kill, and the answer: a 503 then). libvips checks its timeout
   * while it computes pixels, not inside an encoder: a costly transform runs in a worker, killed at the
   * deadline, its slot free at once; a cheap one in this process keeps its slot until it really ends (the
   * bound on concurrent transforms holds) and its result still goes to the result cache.
   * @param {VariantJob} job @param {Prepared} prepared @returns {Promise<{ data: Buffer, format: OutputFormat }>}
   */
  async function transformInSlot(job, prepared) {
    const { want, mode } = job;
    const small = Math.max(want.width || 0, want.height || 0) <= config.SMALL_BOX && Boolean(want.width || want.height);
    /** @type {(deadline: number) => void} */
    let started = () => {};
    const slotStart = new Promise((resolve) => {
      started = resolve;
    });
    const done = queue
      .run(
        async () => {
          const deadline = performance.now() + config.TRANSFORM_TIMEOUT_S * 1000;
          started(deadline);
          return runPipeline(job, prepared, deadline);
        },
        { small, release: prepared.release, later: mode === 'warm' },
      )
      .then(({ value, waitMs }) => keepMade(job, prepared, value, waitMs));
    done.catch(() => {});
    // the answer's deadline starts with the slot, as the transform's does
    const deadline = await Promise.race([slotStart, done.then(() => Infinity)]);
    return deadline === Infinity ? done : byDeadline(done, /** @type {number} */ (deadline), transformTimeout);
  }

  /**
   * The pipeline, here or in a worker, within `deadline`. @param {VariantJob} job @param {Prepared} prepared
   * @param {number} deadline performance.now() ms
   */
  async function runPipeline(job, { file, plan: p }, deadline) {
    const begun = performance.now();
    const warm = job.mode === 'warm';
    // a warmer's on one thread, at the lowest priority: a reader's transform that starts meanwhile gets the CPU
    const threads = warm ? 1 : config.TRANSFORM_THREADS || threadsPerImage(queue.running, cores);
    const timeoutS = Math.max(1, Math.ceil(msUntil(deadline) / 1000));
    const output = inWorker(job, p)
      ? await (warm ? deps.warmWorkers : deps.workers).run(
          file,
          p,
          { ...plainEncoder, timeoutS, threads },
          msUntil(deadline),
        )
      : await transform(file, p, { ...encoder, timeoutS, threads });
    job.timings.transform = performance.now() - begun;
    return output;
  }

  /**
   * A made variant counted and kept; never bigger than the source: a variant of the original's own size
   * that came out larger is the original, when the client takes its format (decided once: the result cache
   * keeps the answer). @param {VariantJob} job @param {Prepared} prepared
   * @param {import('../pipeline/index.js').TransformOutput} value @param {number} waitMs
   */
  async function keepMade(job, { file, info, plan: p, fallback }, value, waitMs) {
    job.timings.queue = waitMs;
    metrics.queueWait.observe(waitMs / 1000);
    metrics.transformDuration.observe({ format: p.format }, /** @type {number} */ (job.timings.transform) / 1000);
    metrics.transforms.inc({ format: p.format });
    metrics.codecs.inc(value.codecs);
    if (p.degraded && fallback === 'queue') metrics.degraded.inc();
    const storeKey = storeKeyOf(job, { plan: p });
    const size = p.fits && originalAnswers(info, job.want) ? (await fs.stat(file)).size : Infinity;
    if (value.data.length > size) {
      metrics.originalAnswers.inc({ reason: 'smaller' });
      const bytes = await fs.readFile(file);
      const format = /** @type {OutputFormat} */ (sourceFormat(info));
      keep(storeKey, format, bytes);
      return { data: bytes, format };
    }
    keep(storeKey, p.format, value.data);
    return { data: value.data, format: p.format };
  }

  /**
   * The original's bytes as the variant: an animation past the budgets that fits the request.
   * @param {VariantJob} job @param {Prepared} prepared @returns {Promise<Variant>}
   */
  async function asOriginal(job, { file, info }) {
    metrics.originalAnswers.inc({ reason: ANIMATION_PAST_BUDGET });
    const bytes = await fs.readFile(file);
    const format = /** @type {'gif' | 'webp'} */ (sourceFormat(info));
    keep(job.key, format, bytes, { pastBudget: true });
    return {
      variantKey: job.key,
      format,
      degraded: false,
      data: bytes,
      timings: job.timings,
      asOriginal: ANIMATION_PAST_BUDGET,
    };
  }

  /**
   * Appends a variant to the result cache (one write into the page cache: the answer waits for nothing).
   * @param {string} key @param {OutputFormat} format @param {Buffer} data @param {{ pastBudget?: boolean }} [options]
   */
  function keep(key, format, data, options) {
    try {
      variants.put(key, extensionOf(format, options), data);
    } catch (err) {
      logger.warn({ err, key }, 'variant not cached');
    }
  }

  return { make };
}
