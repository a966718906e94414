// A transform process of the worker pool (pool.js): takes { file, plan, options }, answers { output } or
// { error }, one job at a time; it runs below the request path's priority (TRANSFORM_NICE), as the origin's
// own transform threads do, and ends with its parent.
import { flushCompileCache } from 'node:module';
import os from 'node:os';
import { loadSystemCodecs } from '../codecs.js';
import { countAgain, keptBytes, transform, transformToPixels, withoutResized } from '../pipeline/index.js';
import { failureOf } from './failure.js';
import { lowerWorkerPriority } from './nice.js';
import { LRUCache } from 'lru-cache';

// Every thread at TRANSFORM_NICE: the pool starts this process through nice(1) (pool.js), so each of its
// threads is born at that priority. Where there is no nice(1), the main thread is lowered here and the
// others (libuv's pool started while the imports above loaded; libvips starts its own from them, and a thread
// inherits its creator's priority) before each job and every second.
const nice = Number(process.env.TRANSFORM_NICE) || 0;
const priority = lowerWorkerPriority({ nice });
if (nice > 0) {
  try {
    os.setPriority(nice);
  } catch {
    // not allowed here: the work runs at the parent's priority
  }
}

// The system's codecs (SYSTEM_CODECS, as the origin's): a warmer's variants, the large ones and every AVIF's
// decode are made here, and sharp's own JPEG decoder and WebP encoder are the slow ones (docs/encoding.md).
// Loaded by this process for itself (their handles do not cross processes); `on` was checked by the origin at
// its start, so a worker does with what it finds. Its buffer pool keeps at most one transform's buffers.
const systemCodecs = loadSystemCodecs(process.env.TRANSFORM_SYSTEM_CODECS === 'off' ? 'off' : 'auto', {
  poolBytes: 16 * 1024 * 1024,
});

// A warm worker's own kept pixels (`keepHere`): the warmer asks every variant of a post's image one after
// another, all in this one process, so they stay here (two sources and 64 MB at most, a minute:
// WARM_KEPT_PIXELS) instead of crossing to the parent and back for each variant
// (with the resized pixels its variants leave beside them for the other formats of their size)
const KEPT_HERE_BYTES = 64 * 1024 * 1024;
/** @type {LRUCache<string, import('../pipeline/work.js').KeptPixels>} */
const keptHere = new LRUCache({
  max: 2,
  maxSize: KEPT_HERE_BYTES,
  sizeCalculation: (pixels) => Math.max(1, keptBytes(pixels)),
  ttl: 60_000,
  // out at the end of their minute, not at the next look, and the parent told what is held (its gauge)
  ttlAutopurge: true,
  dispose: () => queueMicrotask(tellHeld),
});
/** The bytes of pixels held here, to the parent (origin_kept_pixels_bytes{holder="warm_workers"}). */
function tellHeld() {
  if (process.connected) process.send?.({ held: keptHere.calculatedSize });
}

process.on(
  'message',
  async (
    /** @type {{ file: string, plan: import('../pipeline/index.js').Plan, options: any, forget?: undefined } | { forget: string }} */ message,
  ) => {
    // a source taken down (or scrubbed again): its pixels leave at once, not at the end of their minute
    if (message.forget !== undefined) return void keptHere.delete(message.forget); // (dispose tells the parent)
    const job = message;
    // the parent hears that this job reached a live worker (pool.js: one sent to a worker that had died idle
    // is sent again, once)
    process.send?.({ started: true });
    priority.scan();
    try {
      const { keepPlan, keepHere, ...sent } = job.options;
      const options = { ...sent, codecs: systemCodecs };
      // the source's kept pixels: given by the parent, kept here, or asked for (the first variant of a source
      // made here): decoded once, the variant made from them, and handed back unless they stay here
      const own = !options.kept && keepHere ? keptHere.get(keepHere) : undefined;
      let kept = options.kept ?? own ?? null;
      const made = !kept && keepPlan ? await transformToPixels(job.file, keepPlan, options) : null;
      if (made && keepHere) {
        keptHere.set(keepHere, made);
        tellHeld();
      }
      kept ??= made;
      const output = await transform(job.file, job.plan, { ...options, kept });
      if (keepHere && kept) {
        countAgain(keptHere, keepHere, kept, KEPT_HERE_BYTES);
        tellHeld();
      }
      // the variant that decoded them counts under the decoder that did; what became of pixels kept here, by
      // origin_kept_pixels_total's results (the parent counts them: a hit, or made and kept here)
      const used = made ? { ...output.codecs, decode: made.decodedBy } : output.codecs;
      const keptUse = own ? 'hit' : made && keepHere ? 'made' : undefined;
      const handed = made && !keepHere ? { kept: withoutResized(made) } : {};
      process.send?.({ output: { ...output, codecs: used, ...handed, ...(keptUse ? { keptUse } : {}) } });
    } catch (err) {
      process.send?.({ error: failureOf(err) });
    }
  },
);
process.on('disconnect', () => process.exit(0));
// this worker's code compiled, for the next worker's start (origin/bin/origin's compile cache, if on): a worker
// killed at its deadline never writes it at exit
flushCompileCache();
