// One transform thread (threads.js): takes { id, file, plan, options }, answers { id, output } or { id, error },
// as many jobs at once as the origin's queue gives it. It loads its own system codecs (their handles and
// buffer pool stay in the thread that made them).
import { parentPort, workerData } from 'node:worker_threads';
import { loadSystemCodecs } from '../codecs.js';
import { transform } from '../pipeline/index.js';
import { failureOf } from './failure.js';

const codecs = loadSystemCodecs(workerData.systemCodecs);
const port = /** @type {import('node:worker_threads').MessagePort} */ (parentPort);

port.on(
  'message',
  async (/** @type {{ id: number, file: string, plan: import('../pipeline/index.js').Plan, options: any }} */ job) => {
    try {
      const output = await transform(job.file, job.plan, { ...job.options, codecs });
      port.postMessage({ id: job.id, output });
    } catch (err) {
      port.postMessage({ id: job.id, error: failureOf(err) });
    }
  },
);
