// The origin's own transforms, each on one of a few transform threads (worker_threads) instead of the event
// loop that serves requests (#47). A transform is mostly native work on libuv's and libvips' threads, but
// driving it (reading the original, sharp's pipeline set-up, the system codecs' calls and their callbacks)
// cost the event loop 1.2–2.6 ms a variant on 2026-11-26 (bench/scale's "where the CPU goes"): one event loop
// is one core, so past some number of cores (about half busy at 16 on the machine measured) it caps the
// variants a second however many cores there are. Each thread has its own event loop, so that work grows with
// the threads; the request path's loop keeps the HTTP, the caches and the queue. Threads share the process
// (libvips, the memory, the priority set by nice.js), unlike the worker processes (pool.js), which exist to
// be killed; a thread's transform is bounded by sharp's own timeout, as the in-process one was.
import { Worker } from 'node:worker_threads';
import { HttpError } from '@stack/lib';
import { errorOf } from './failure.js';

const SCRIPT = new URL('./transform-thread.js', import.meta.url);

/**
 * The cores one event loop drives transforms for. bench/scale on a 16-core machine (2026-11-26,
 * bench/FINDINGS.md) found the request path's loop about half busy at 16 cores, and no gain from transform
 * loops at or below 16 (each costs ~1 ms of CPU a variant in messages and a second V8, and ~60 MB).
 */
export const CORES_A_LOOP = 16;

/**
 * The transform loops an origin starts: TRANSFORM_LOOPS, or where it is 0 one for each CORES_A_LOOP cores past
 * the first CORES_A_LOOP (the request path's loop drives those); -1: none. @param {number} setting @param {number} cores
 */
export const transformLoops = (setting, cores) =>
  setting === -1 ? 0 : setting || Math.floor((cores - 1) / CORES_A_LOOP);

/**
 * @typedef {import('../pipeline/index.js').TransformOutput} TransformOutput
 * @typedef {{ id: number, output?: TransformOutput, error?: import('./failure.js').Failure }} ThreadAnswer
 */

/**
 * Transform threads: `count` of them, each job to the one with the fewest running. A thread that dies fails
 * its jobs with a 500 and is replaced a second later.
 * @param {{ count: number, systemCodecs: 'auto' | 'on' | 'off' }} options
 */
export function createTransformThreads({ count, systemCodecs }) {
  /** @type {Array<{ worker: Worker, running: Map<number, { resolve: (output: TransformOutput) => void, reject: (err: Error) => void }> }>} */
  const threads = [];
  let nextId = 0;
  let closed = false;

  /** @param {number} at */
  function start(at) {
    const worker = new Worker(SCRIPT, { workerData: { systemCodecs } });
    const thread = { worker, running: new Map() };
    worker.on('message', (/** @type {ThreadAnswer} */ answer) => {
      const job = thread.running.get(answer.id);
      if (!job) return;
      thread.running.delete(answer.id);
      if (answer.output) return job.resolve({ ...answer.output, data: Buffer.from(answer.output.data) });
      job.reject(errorOf(/** @type {NonNullable<ThreadAnswer['error']>} */ (answer.error)));
    });
    const fail = (/** @type {Error} */ err) => {
      for (const job of thread.running.values())
        job.reject(new HttpError(500, 'internal_error', { reason: `transform thread ended: ${err.message}` }));
      thread.running.clear();
      // replaced a second later: a thread that cannot start does not spin
      if (!closed) setTimeout(() => closed || start(at), 1000).unref();
    };
    worker.on('error', fail);
    worker.on('exit', (code) => threads[at] === thread && !closed && code !== 0 && fail(new Error(`exit ${code}`)));
    worker.unref();
    threads[at] = thread;
  }
  for (let at = 0; at < count; at++) start(at);

  return {
    /**
     * The variant of `file` by `plan` on the least busy thread. `options`: the pipeline's, less the system
     * codecs (each thread loads its own). @param {string} file @param {import('../pipeline/index.js').Plan} plan
     * @param {Omit<import('../pipeline/index.js').TransformOptions, 'codecs'>} options @returns {Promise<TransformOutput>}
     */
    run(file, plan, options) {
      const thread = threads.reduce((best, each) => (each.running.size < best.running.size ? each : best));
      const id = nextId++;
      return new Promise((resolve, reject) => {
        thread.running.set(id, { resolve, reject });
        thread.worker.postMessage({ id, file, plan, options });
      });
    },
    /** Jobs running on the threads now. */
    get running() {
      return threads.reduce((sum, thread) => sum + thread.running.size, 0);
    },
    async close() {
      closed = true;
      await Promise.all(threads.map((thread) => thread.worker.terminate()));
    },
  };
}
/** @typedef {ReturnType<typeof createTransformThreads>} TransformThreads */
