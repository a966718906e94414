// One transform thread (threads.js): takes { id, file, plan, options }, answers { id, output } or { id, error },
// as many jobs at once as the origin's queue gives it. It loads its own system codecs (their handles and
// buffer pool stay in the thread that made them).
import { parentPort, workerData } from 'node:worker_threads';
import { isGone } from '@stack/lib';
import { loadSystemCodecs } from '../codecs.js';
import { transform } from '../pipeline/index.js';

const codecs = loadSystemCodecs(workerData.systemCodecs);
const port = /** @type {import('node:worker_threads').MessagePort} */ (parentPort);

port.on(
  'message',
  async (/** @type {{ id: number, file: string, plan: import('../pipeline/index.js').Plan, options: any }} */ job) => {
    try {
      const output = await transform(job.file, job.plan, { ...job.options, codecs });
      port.postMessage({ id: job.id, output });
    } catch (err) {
      const failure = /** @type {any} */ (err);
      port.postMessage({
        id: job.id,
        error: {
          status: failure.status || 500,
          name: failure.status ? failure.name : 'internal_error',
          info: failure.info || {},
          headers: failure.headers || {},
          missing: isGone(failure),
          message: String(failure.message),
        },
      });
    }
  },
);
