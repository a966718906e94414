// Costly transforms in child processes that can be stopped. libvips checks its timeout while it computes
// pixels, not inside an encoder: an AVIF encode of a large image ran on for seconds past TRANSFORM_TIMEOUT_S,
// holding its transform slot all that time, so a few requests for large AVIFs of a tiny file that declares
// 7000×7000 held every slot (#37). In a child, the work is killed at its deadline and the slot is free at once.
import { fork } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { HttpError } from '@stack/lib';
import { transformTimeout } from '../pipeline/index.js';
import { errorOf } from './failure.js';

/** /proc's statm counts pages of this size (x86-64 and arm64 Linux as Debian builds them) */
const PAGE_BYTES = 4096;
const SCRIPT = new URL('./transform-worker.js', import.meta.url);
/** coreutils' nice: a worker started through it has every thread at its priority from the first one on */
const NICE = ['/usr/bin/nice', '/bin/nice'].find((file) => existsSync(file));

/** @typedef {import('node:child_process').ChildProcess} ChildProcess */
/** @typedef {{ resolve: (child: ChildProcess) => void, reject: (err: unknown) => void }} Waiting */
const INTERNAL = { status: 500, name: 'internal_error', info: {}, headers: {}, missing: false };
/** No worker could start: fork failed (no file descriptors or processes left). */
const workerUnavailable = () =>
  new HttpError(503, 'unavailable', { reason: 'no transform worker could start' }, { 'Retry-After': '5' });

/**
 * @typedef {import('../pipeline/index.js').TransformOutput & { kept?: import('../pipeline/work.js').KeptPixels,
 *   keptUse?: 'hit' | 'made' }} WorkerOutput
 *   kept: the source's pixels the worker decoded to make the variant from (asked by `options.keepPlan`);
 *   keptUse: what became of pixels it keeps itself (`options.keepHere`): made from them, or decoded and kept
 * @typedef {{ output?: WorkerOutput, error?: import('./failure.js').Failure }} WorkerAnswer
 */

/**
 * A pool of transform processes, one job each at a time: at most `size` alive (a job past them waits here for
 * one, within its time), kept between jobs. One idle for `idleMs` ends, except the last one alive: after a
 * burst of AVIFs each holds the memory of its largest encode (~170 MB on 2026-11-27), while starting one again
 * costs ~120 ms (its Node, sharp and the pipeline), which the last one alive spares the next AVIF after a quiet
 * hour.
 * @param {{ size: number, nice: number, arenas?: number, systemCodecs?: 'auto' | 'on' | 'off', idleMs?: number,
 *   onKill?: () => void, onHeld?: (bytes: number) => void }} options arenas: each worker's glibc malloc arenas
 *   (MALLOC_ARENA_MAX; 0: the origin's own); systemCodecs: SYSTEM_CODECS, loaded by each worker for itself;
 *   idleMs: 0 or Infinity keeps them until the origin stops; onHeld: the bytes of pixels the workers keep
 *   themselves (a warm worker's), together: at the start, then each time one tells or ends
 */
export function createWorkerPool({
  size,
  nice,
  arenas = 0,
  systemCodecs = 'off',
  idleMs = Infinity,
  onKill = () => {},
  onHeld = () => {},
}) {
  /** the kept workers, the most recently used last: the next job takes it, the first ones idle out */
  /** @type {ChildProcess[]} */
  const idle = [];
  /** @type {Set<ChildProcess>} */
  const all = new Set();
  /** @type {Map<ChildProcess, NodeJS.Timeout>} */
  const idleTimers = new Map();
  const idleFor = idleMs > 0 && Number.isFinite(idleMs) ? idleMs : 0;
  /**
   * jobs waiting for a worker, the first first
   * @type {Waiting[]}
   */
  const waiting = [];
  let closed = false;
  /** the bytes of kept pixels each worker holds, as it last told (transform-worker.js) */
  /** @type {Map<ChildProcess, number>} */
  const held = new Map();
  const tellHeld = () => onHeld([...held.values()].reduce((sum, bytes) => sum + bytes, 0));
  tellHeld(); // none yet

  // Started at its priority (nice -n N node …): every thread it will have (libuv's pool, libvips' workers,
  // V8's helpers) is born at it, where lowering them once they run lost a race on a busy machine
  const niced =
    nice > 0 && NICE ? { execPath: NICE, execArgv: ['-n', String(nice), process.execPath, ...process.execArgv] } : {};
  // one transform at a time needs few arenas: glibc gives a thread that first allocates a new arena up to the
  // limit, and a worker's libuv and libvips threads would each hold one of the origin's one-a-core, their
  // freed memory kept apart
  const workerArenas = arenas > 0 ? { MALLOC_ARENA_MAX: String(arenas) } : {};

  /**
   * A new worker, or a 503 where none can start: out of file descriptors or processes, fork fails, and the
   * ChildProcess would emit an 'error' that nothing hears, which ends the origin.
   */
  function spawn() {
    /** @type {ChildProcess} */
    let child;
    try {
      child = fork(SCRIPT, [], {
        ...niced,
        serialization: 'advanced',
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
        env: { ...process.env, TRANSFORM_NICE: String(nice), TRANSFORM_SYSTEM_CODECS: systemCodecs, ...workerArenas },
      });
    } catch {
      throw workerUnavailable();
    }
    // what it would say is heard where it happens: a spawn that failed has no pid (below); a worker gone, by
    // its 'exit' (a job sent to it meanwhile goes to another once, unless it had begun: run())
    child.on('error', () => {});
    if (child.pid === undefined) throw workerUnavailable();
    all.add(child);
    child.on('message', (/** @type {{ held?: number }} */ message) => {
      if (typeof message?.held !== 'number') return;
      held.set(child, message.held);
      tellHeld();
    });
    child.once('exit', () => {
      if (held.delete(child)) tellHeld();
      all.delete(child);
      unpark(child);
      // a worker killed at its deadline or ended: a job waiting gets a new one
      serveWaiting();
    });
    return child;
  }

  /**
   * A worker for the next job: a kept one, a new one, or the next to be free. A kept one already gone (ended
   * while idle, its 'exit' not yet heard) is let go.
   * @returns {Promise<ChildProcess>}
   */
  function take() {
    for (let kept = idle.at(-1); kept; kept = idle.at(-1)) {
      unpark(kept);
      if (kept.connected) return Promise.resolve(kept);
      end(kept);
    }
    // (a spawn that throws rejects the promise)
    return new Promise((resolve, reject) => {
      if (all.size < size) resolve(spawn());
      else waiting.push({ resolve, reject });
    });
  }

  /**
   * A worker done with its job: to the next job waiting, or kept.
   * @param {ChildProcess} child
   */
  function release(child) {
    if (!child.connected) return end(child);
    const next = waiting.shift();
    if (next) next.resolve(child);
    else park(child);
  }

  /**
   * Keeps an idle worker for the next job, for `idleMs` unless it is the last one alive.
   * @param {ChildProcess} child
   */
  function park(child) {
    idle.push(child);
    if (!idleFor) return;
    const timer = setTimeout(() => {
      idleTimers.delete(child);
      if (all.size > 1 && unpark(child)) end(child);
    }, idleFor);
    timer.unref();
    idleTimers.set(child, timer);
  }

  /**
   * Ends a worker, out of the count at once: a kept one's timer at the same moment sees it gone.
   * @param {ChildProcess} child
   */
  function end(child) {
    all.delete(child);
    child.kill();
    serveWaiting();
  }

  /** A new worker for the first job waiting, where one fits (none once the pool is closed). */
  function serveWaiting() {
    if (closed || !waiting.length || all.size >= size) return;
    const next = /** @type {Waiting} */ (waiting.shift());
    try {
      next.resolve(spawn());
    } catch (err) {
      next.reject(err);
    }
  }

  /**
   * Takes a worker out of the kept ones; whether it was kept.
   * @param {ChildProcess} child
   */
  function unpark(child) {
    clearTimeout(idleTimers.get(child));
    idleTimers.delete(child);
    const at = idle.indexOf(child);
    if (at >= 0) idle.splice(at, 1);
    return at >= 0;
  }

  /**
   * The transform of `file` by `plan` in a worker, or a 503 transform_timeout after `timeoutMs`, the wait for a
   * worker included (a worker at work killed). @param {string} file @param {import('../pipeline/index.js').Plan} plan
   * @param {Omit<Parameters<typeof import('../pipeline/index.js').transform>[2], 'codecs'> & { keepPlan?: import('../pipeline/index.js').Plan | null,
   *   keepHere?: string }} options keepPlan: decode the source's kept pixels by it first, make the variant from them,
   *   and hand them back; keepHere: keep them in the worker instead, under this key (a warm worker)
   * @param {number} timeoutMs
   * @returns {Promise<WorkerOutput>}
   */
  function run(file, plan, options, timeoutMs) {
    return new Promise((resolve, reject) => {
      /** @type {ChildProcess | null} */
      let child = null;
      let over = false;
      let started = false;
      let resent = false;
      const timer = setTimeout(() => {
        over = true;
        if (child) {
          detach();
          child.kill('SIGKILL');
          onKill();
        }
        reject(transformTimeout());
      }, timeoutMs);
      const onExit = () => {
        detach();
        // a worker that died idle, its end not yet heard when it was taken: the job never reached it (writing
        // to its socket reports no error), so it goes to another worker, once
        if (!started && !resent) {
          resent = true;
          child = null;
          return send();
        }
        clearTimeout(timer);
        reject(new HttpError(500, 'internal_error', { reason: 'transform worker ended' }));
      };
      const onMessage = (/** @type {WorkerAnswer & { started?: boolean, held?: number }} */ answer) => {
        if (answer.started) {
          started = true;
          return;
        }
        // what it keeps, told while at work: heard by spawn()'s listener
        if (answer.held !== undefined) return;
        clearTimeout(timer);
        detach();
        release(/** @type {ChildProcess} */ (child));
        if (answer.output) {
          const { data, codecs, kept, keptUse, sharedResize } = answer.output;
          return resolve({
            data: Buffer.from(data),
            codecs,
            ...(kept ? { kept } : {}),
            ...(keptUse ? { keptUse } : {}),
            ...(sharedResize ? { sharedResize } : {}),
          });
        }
        reject(errorOf(answer.error || INTERNAL));
      };
      function detach() {
        child?.off('message', onMessage);
        child?.off('exit', onExit);
      }
      function send() {
        take().then(
          (worker) => {
            // its time ran out while it waited: the worker goes on to the next job
            if (over) return release(worker);
            child = worker;
            worker.on('message', onMessage);
            worker.once('exit', onExit);
            worker.send({ file, plan, options });
          },
          // none could start
          (err) => {
            clearTimeout(timer);
            reject(err);
          },
        );
      }
      send();
    });
  }

  return {
    run,
    /** Workers alive now (running or kept). */
    get size() {
      return all.size;
    },
    /** Their resident memory together, in bytes (Linux's /proc; 0 elsewhere). */
    residentBytes() {
      let pages = 0;
      for (const { pid } of all) {
        try {
          pages += Number(readFileSync(`/proc/${pid}/statm`, 'utf8').split(' ')[1]) || 0;
        } catch {
          // ended meanwhile, or no /proc
        }
      }
      return pages * PAGE_BYTES;
    },
    /** Tells every worker to drop what it keeps of a source (a warm worker's pixels: transform-worker.js). @param {string} key */
    forget(key) {
      for (const child of all) if (child.connected) child.send({ forget: key });
    },
    /** Ends every worker; a job still waiting for one is answered at its deadline. */
    close() {
      closed = true;
      for (const child of all) child.kill();
      for (const timer of idleTimers.values()) clearTimeout(timer);
      idleTimers.clear();
    },
  };
}
/** @typedef {ReturnType<typeof createWorkerPool>} WorkerPool */
