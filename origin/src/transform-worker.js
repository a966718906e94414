// A transform process of the worker pool (workers.js): takes { file, plan, options }, answers { output } or
// { error }, one job at a time; it runs below the request path's priority (TRANSFORM_NICE), as the origin's
// own transform threads do, and ends with its parent.
import os from 'node:os';
import { transform } from './pipeline/index.js';
import { lowerWorkerPriority } from './nice.js';
import { isGone } from '@stack/lib';

// Every thread at TRANSFORM_NICE: the pool starts this process through nice(1) (workers.js), so each of its
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

process.on(
  'message',
  async (/** @type {{ file: string, plan: import('./pipeline/index.js').Plan, options: any }} */ job) => {
    priority.scan();
    try {
      const output = await transform(job.file, job.plan, job.options);
      process.send?.({ output });
    } catch (err) {
      const failure = /** @type {any} */ (err);
      process.send?.({
        error: {
          status: failure.status || 500,
          name: failure.status ? failure.name : 'internal_error',
          info: failure.info || {},
          headers: failure.headers || {},
          missing: isGone(failure),
        },
      });
    }
  },
);
process.on('disconnect', () => process.exit(0));
