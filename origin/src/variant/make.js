// Making one variant (a job: job.js): its original (../originals/), its plan, a place in the transform queue,
// the pipeline in this process or in a worker, and the answer kept in the result cache. In order:
// prepare → (the original as it is | a degraded answer already cached | transform in a slot) → keep.
import fs from 'node:fs/promises';
import { degradeDepth, isGone, usableCores } from '@stack/lib';
import { createKeptPixels } from '../kept-pixels.js';
import {
  originalAnswers,
  plan,
  sourceFormat,
  threadsPerImage,
  transform,
  transformTimeout,
  withoutResized,
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
 * @typedef {{ config: import('@stack/lib/src/config-types.js').OriginConfig, store: import('../store/index.js').Store,
 *   originals: import('../originals/index.js').Originals, variants: import('../cache/pack-cache.js').PackCache,
 *   queue: import('../queue.js').TransformQueue, metrics: import('../metrics.js').OriginMetrics, logger: import('pino').Logger,
 *   codecs?: import('../codecs.js').SystemCodecs, workers: import('../workers/pool.js').WorkerPool,
 *   warmWorkers: import('../workers/pool.js').WorkerPool, transformThreads?: import('../workers/threads.js').TransformThreads | null,
 *   encodeLater: (job: VariantJob) => void }} MakerDeps
 *   encodeLater: the AVIF a first answer fell back from, queued for idle capacity (background.js)
 */

/** @param {MakerDeps} deps */
export function createMaker(deps) {
  const m = makerContext(deps);
  return {
    /** The job's variant. @param {VariantJob} job */
    make: (job) => make(m, job),
    /** Drops a source's kept pixels, here and in the warm workers (a takedown, a re-scrubbed upload). @param {string} sourceId */
    forgetPixels: (/** @type {string} */ sourceId) => {
      m.kept.drop(sourceId);
      m.warmWorkers.forget(sourceId);
    },
  };
}

/**
 * What every step reads: the dependencies, and what is derived from the settings once.
 * @param {MakerDeps} deps
 */
function makerContext(deps) {
  const { config, codecs, metrics } = deps;
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
  return {
    ...deps,
    cores: usableCores(),
    degradeDepth: degradeDepth(config),
    budgets: {
      maxPixels: config.MAX_OUTPUT_PIXELS,
      avifPixels: config.AVIF_MAX_PIXELS,
      maxFrames: config.MAX_FRAMES,
      maxInputPixels: config.MAX_INPUT_PIXELS,
    },
    encoder,
    plainEncoder,
    // one decode per picture: the pixels a source's variants are made from, kept a while (kept-pixels.js)
    kept: createKeptPixels({
      maxBytes: config.KEPT_PIXELS_BYTES,
      ttlS: config.KEPT_PIXELS_TTL_S,
      width: config.KEPT_PIXELS_WIDTH,
      warmKeeps: config.WARM_KEPT_PIXELS,
      options: encoder,
      metrics,
    }),
  };
}
/** @typedef {ReturnType<typeof makerContext>} Maker */

/**
 * What a worker process makes (it can be stopped at the deadline): every AVIF, every HEIC source (libheif
 * and libde265 parse it there), any large variant, and every warmer's.
 * @param {Maker} m @param {VariantJob} job @param {import('../pipeline/index.js').Plan} p
 */
const inWorker = (m, job, p) =>
  job.mode === 'warm' || p.format === 'avif' || Boolean(p.heic) || p.pixels > m.config.TRANSFORM_WORKER_PIXELS;

/**
 * The job's variant. A cached original whose file is gone (deleted by hand, a disk swapped) is fetched or
 * read again, once, instead of failing as a bad image. @param {VariantJob} job @returns {Promise<Variant>}
 */
async function make(m, job) {
  try {
    return await makeOnce(m, job);
  } catch (err) {
    if (!isGone(err)) throw err;
    // an upload's own file (STORE=fs) is the upload: gone is gone; a copy of the bucket's is read again
    if (job.source.uploadKey && !m.store.copies) throw err;
    m.originals.forgetCached(job.source);
    return makeOnce(m, job);
  }
}

/** @param {Maker} m @param {VariantJob} job @returns {Promise<Variant>} */
async function makeOnce(m, job) {
  // refused before any fetch, stat or probe: under overload a refusal must stay cheap
  if (m.queue.full) throw m.queue.overloaded();
  const prepared = await prepare(m, job);
  if (prepared.plan.passthrough) {
    prepared.release();
    return asOriginal(m, job, prepared);
  }
  const degraded = prepared.plan.degraded ? degradedAnswer(m, job, prepared) : null;
  if (degraded) return degraded;
  const output = await transformInSlot(m, job, prepared);
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
 * failure; handed to the slot otherwise). @param {Maker} m @param {VariantJob} job @returns {Promise<Prepared>}
 */
async function prepare(m, job) {
  const file = await m.originals.file(job.source, job.timings);
  const release = m.queue.reserve();
  const fallback = fallbackReason(m, job);
  try {
    const info = await m.originals.info(file);
    return { file, info, plan: plan(info, job.want, Boolean(fallback), m.budgets), fallback, release };
  } catch (err) {
    release();
    throw err;
  }
}

/**
 * Why the cheaper encoding answers instead of AVIF: a deep queue (degraded), or format=auto's first answer
 * (AUTO_AVIF_FIRST_ANSWER), which never waits for an AVIF encode. @param {Maker} m @param {VariantJob} job
 */
function fallbackReason({ queue, config, degradeDepth }, { want, mode }) {
  if (queue.depth >= degradeDepth) return 'queue';
  if (mode === 'reader' && want.accept === 'avif' && config.AUTO_AVIF_FIRST_ANSWER) return 'first_answer';
  return '';
}

/**
 * A degraded plan (WebP instead of AVIF): the AVIF queued for later, and the WebP from the result cache when
 * it is there (stored under the key of what it really is, never under the avif/auto key); null to make it.
 * @param {Maker} m @param {VariantJob} job @param {Prepared} prepared @returns {Variant | null}
 */
function degradedAnswer(m, job, prepared) {
  const firstAnswer = prepared.fallback === 'first_answer';
  if (firstAnswer) m.metrics.fallbacks.inc();
  m.encodeLater(job);
  const cached = m.variants.get(storeKeyOf(job, prepared));
  if (!cached) return null;
  prepared.release();
  return { variantKey: job.key, format: 'webp', degraded: true, firstAnswer, cached, timings: job.timings };
}

/**
 * The key a made variant is kept under: a degraded one under the WebP's.
 * @param {VariantJob} job @param {{ plan: Prepared['plan'] }} prepared
 */
const storeKeyOf = (job, prepared) =>
  prepared.plan.degraded ? variantKey(job.source, { ...job.want, format: 'webp' }) : job.key;

/**
 * The pipeline in a transform slot, by one deadline: TRANSFORM_TIMEOUT_S from the slot's start, read by every
 * stage (libvips' own timeout, the worker's kill, and the answer: a 503 then). libvips checks its timeout
 * while it computes pixels, not inside an encoder: a costly transform runs in a worker, killed at the
 * deadline, its slot free at once; a cheap one in this process keeps its slot until it really ends (the
 * bound on concurrent transforms holds) and its result still goes to the result cache.
 * @param {Maker} m @param {VariantJob} job @param {Prepared} prepared @returns {Promise<{ data: Buffer, format: OutputFormat }>}
 */
async function transformInSlot(m, job, prepared) {
  const { config, queue } = m;
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
        return runPipeline(m, job, prepared, deadline);
      },
      { small, release: prepared.release, later: mode === 'warm' },
    )
    .then(({ value, waitMs }) => keepMade(m, job, prepared, value, waitMs));
  done.catch(() => {});
  // the answer's deadline starts with the slot, as the transform's does
  const deadline = await Promise.race([slotStart, done.then(() => Infinity)]);
  return deadline === Infinity ? done : byDeadline(done, /** @type {number} */ (deadline), transformTimeout);
}

/**
 * The pipeline, here or in a worker, within `deadline`. @param {Maker} m @param {VariantJob} job
 * @param {Prepared} prepared @param {number} deadline performance.now() ms
 */
async function runPipeline(m, job, { file, info, plan: p }, deadline) {
  const { config, queue, kept, encoder, plainEncoder } = m;
  const begun = performance.now();
  const warm = job.mode === 'warm';
  // a warmer's on one thread, at the lowest priority: a reader's transform that starts meanwhile gets the CPU
  const threads = warm ? 1 : config.TRANSFORM_THREADS || threadsPerImage(queue.running, m.cores);
  // the source's kept pixels (kept-pixels.js): a variant they cover is made from them; the first variant
  // of a source decodes them, here (once however many ask) or in its worker, which hands them back
  const crossing = inWorker(m, job, p);
  const { pixels: held, keep, own } = kept.lookup(job.source.id, info, p, { crossing, warm });
  const timeoutS = () => Math.max(1, Math.ceil(msUntil(deadline) / 1000));
  /** @type {import('../pipeline/index.js').TransformOutput} */
  let output;
  if (crossing) {
    const pool = warm ? m.warmWorkers : m.workers;
    // a warm worker keeps the pixels it decodes itself (the warmer's variants of a source all go to it) and
    // makes from them every variant they cover; a larger one (a full-size variant of a picture wider than
    // twice KEPT_PIXELS_WIDTH) is made from the file
    const keepHere = own ? job.source.id : undefined;
    // a copy of held pixels crosses, without the resized ones beside them (of use only here)
    const options = {
      ...plainEncoder,
      timeoutS: timeoutS(),
      threads,
      kept: held && withoutResized(held),
      keepPlan: keep,
      keepHere,
    };
    const answer = await pool.run(file, p, options, msUntil(deadline));
    if (answer.kept) kept.putMade(job.source.id, answer.kept);
    if (own) kept.counted(answer.keptUse);
    output = answer;
  } else {
    const pixels =
      held ?? (keep ? await byDeadline(kept.make(job.source.id, file, keep), deadline, transformTimeout) : null);
    // on a transform thread (threads.js), unless it is made from kept pixels, which stay in this thread
    output =
      m.transformThreads && !pixels
        ? await m.transformThreads.run(file, p, { ...plainEncoder, timeoutS: timeoutS(), threads })
        : await transform(file, p, { ...encoder, timeoutS: timeoutS(), threads, kept: pixels });
    if (pixels) kept.made(job.source.id, pixels);
    // the variant whose pixels were decoded for it counts under the decoder that did
    if (pixels && !held) output = { ...output, codecs: { ...output.codecs, decode: pixels.decodedBy } };
  }
  job.timings.transform = performance.now() - begun;
  return output;
}

/**
 * A made variant counted and kept; never bigger than the source: a variant of the original's own size
 * that came out larger is the original, when the client takes its format (decided once: the result cache
 * keeps the answer). @param {Maker} m @param {VariantJob} job @param {Prepared} prepared
 * @param {import('../pipeline/index.js').TransformOutput} value @param {number} waitMs
 */
async function keepMade(m, job, { file, info, plan: p, fallback }, value, waitMs) {
  const { metrics } = m;
  job.timings.queue = waitMs;
  metrics.queueWait.observe(waitMs / 1000);
  metrics.transformDuration.observe({ format: p.format }, /** @type {number} */ (job.timings.transform) / 1000);
  metrics.transforms.inc({ format: p.format });
  metrics.codecs.inc(value.codecs);
  if (value.sharedResize) metrics.sharedResizes.inc();
  if (p.degraded && fallback === 'queue') metrics.degraded.inc();
  const storeKey = storeKeyOf(job, { plan: p });
  const size = p.fits && originalAnswers(info, job.want) ? (await fs.stat(file)).size : Infinity;
  if (value.data.length > size) {
    metrics.originalAnswers.inc({ reason: 'smaller' });
    const bytes = await fs.readFile(file);
    const format = /** @type {OutputFormat} */ (sourceFormat(info));
    keep(m, storeKey, format, bytes);
    return { data: bytes, format };
  }
  keep(m, storeKey, p.format, value.data);
  return { data: value.data, format: p.format };
}

/**
 * The original's bytes as the variant: an animation past the budgets that fits the request.
 * @param {Maker} m @param {VariantJob} job @param {Prepared} prepared @returns {Promise<Variant>}
 */
async function asOriginal(m, job, { file, info }) {
  m.metrics.originalAnswers.inc({ reason: ANIMATION_PAST_BUDGET });
  const bytes = await fs.readFile(file);
  const format = /** @type {'gif' | 'webp'} */ (sourceFormat(info));
  keep(m, job.key, format, bytes, { pastBudget: true });
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
 * @param {Maker} m @param {string} key @param {OutputFormat} format @param {Buffer} data
 * @param {{ pastBudget?: boolean }} [options]
 */
function keep({ variants, logger }, key, format, data, options) {
  try {
    variants.put(key, extensionOf(format, options), data);
  } catch (err) {
    logger.warn({ err, key }, 'variant not cached');
  }
}
