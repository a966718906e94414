// Costly transforms in child processes that can be stopped. libvips checks its timeout while it computes
// pixels, not inside an encoder: an AVIF encode of a large image ran on for seconds past TRANSFORM_TIMEOUT_S,
// holding its transform slot all that time, so a few requests for large AVIFs of a tiny file that declares
// 7000×7000 held every slot (#37). In a child, the work is killed at its deadline and the slot is free at once.
import { fork } from 'node:child_process';
import { existsSync } from 'node:fs';
import { HttpError } from '@stack/lib';
import { transformTimeout } from '../pipeline/index.js';
import { errorOf } from './failure.js';

const SCRIPT = new URL('./transform-worker.js', import.meta.url);
/** coreutils' nice: a worker started through it has every thread at its priority from the first one on */
const NICE = ['/usr/bin/nice', '/bin/nice'].find((file) => existsSync(file));

/**
 * @typedef {import('../pipeline/index.js').TransformOutput & { kept?: import('../pipeline/work.js').KeptPixels }} WorkerOutput
 *   kept: the source's pixels the worker decoded to make the variant from (asked by `options.keepPlan`)
 * @typedef {{ output?: WorkerOutput, error?: import('./failure.js').Failure }} WorkerAnswer
 */

/**
 * A pool of transform processes: one job each at a time (the transform queue bounds how many run), `keep`
 * kept between jobs, any more started on demand and ended after their job.
 * @param {{ keep: number, nice: number, onKill?: () => void }} options
 */
export function createWorkerPool({ keep, nice, onKill = () => {} }) {
  /** @type {import('node:child_process').ChildProcess[]} */
  const idle = [];
  /** @type {Set<import('node:child_process').ChildProcess>} */
  const all = new Set();

  // Started at its priority (nice -n N node …): every thread it will have (libuv's pool, libvips' workers,
  // V8's helpers) is born at it, where lowering them once they run lost a race on a busy machine
  const niced =
    nice > 0 && NICE ? { execPath: NICE, execArgv: ['-n', String(nice), process.execPath, ...process.execArgv] } : {};

  function spawn() {
    const child = fork(SCRIPT, [], {
      ...niced,
      serialization: 'advanced',
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      env: { ...process.env, TRANSFORM_NICE: String(nice) },
    });
    all.add(child);
    child.once('exit', () => {
      all.delete(child);
      const at = idle.indexOf(child);
      if (at >= 0) idle.splice(at, 1);
    });
    return child;
  }

  /**
   * The transform of `file` by `plan` in a worker, or a 503 transform_timeout after `timeoutMs` (the worker
   * killed). @param {string} file @param {import('../pipeline/index.js').Plan} plan
   * @param {Omit<Parameters<typeof import('../pipeline/index.js').transform>[2], 'codecs'> & { keepPlan?: import('../pipeline/index.js').Plan | null,
   *   keepHere?: string }} options keepPlan: decode the source's kept pixels by it first, make the variant from them,
   *   and hand them back; keepHere: keep them in the worker instead, under this key (a warm worker)
   * @param {number} timeoutMs
   * @returns {Promise<WorkerOutput>}
   */
  function run(file, plan, options, timeoutMs) {
    const child = idle.pop() || spawn();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        done();
        child.kill('SIGKILL');
        onKill();
        reject(transformTimeout());
      }, timeoutMs);
      const onExit = () => {
        done();
        reject(new HttpError(500, 'internal_error', { reason: 'transform worker ended' }));
      };
      const onMessage = (/** @type {WorkerAnswer} */ answer) => {
        done();
        if (idle.length < keep && child.connected) idle.push(child);
        else child.kill();
        if (answer.output) {
          const { data, codecs, kept } = answer.output;
          return resolve({ data: Buffer.from(data), codecs, ...(kept ? { kept } : {}) });
        }
        reject(errorOf(answer.error || { status: 500, name: 'internal_error', info: {}, headers: {}, missing: false }));
      };
      function done() {
        clearTimeout(timer);
        child.off('message', onMessage);
        child.off('exit', onExit);
      }
      child.on('message', onMessage);
      child.once('exit', onExit);
      child.send({ file, plan, options });
    });
  }

  return {
    run,
    /** Workers alive now (running or kept). */
    get size() {
      return all.size;
    },
    close() {
      for (const child of all) child.kill();
    },
  };
}
/** @typedef {ReturnType<typeof createWorkerPool>} WorkerPool */
