import { Worker } from 'node:worker_threads';

/**
 * Writes small files from a thread of its own: write to a temp file, then rename it into place (a crash
 * never leaves half a file under a name). Through the libuv pool the same write is four round trips
 * (open, write, close, rename), each a hand-off to another CPU; measured here, that cost a variant about
 * 2 ms of CPU, 6% of its transform. One message each way instead, and the writes themselves stay off the
 * event loop. The thread starts on first use and again after a failure.
 */
export class FileWriter {
  constructor() {
    /** @type {Worker | null} */
    this.worker = null;
    /** @type {Map<number, { resolve: () => void, reject: (err: Error) => void, done: Promise<void> }>} */
    this.pending = new Map();
    this.nextId = 0;
  }

  /**
   * @param {string} temp @param {string} target @param {Buffer} data
   * @param {boolean} makeDir whether `target`'s directory may not exist yet
   * @returns {Promise<void>} settled once the file is under `target`
   */
  write(temp, target, data, makeDir) {
    const id = this.nextId++;
    /** @type {{ resolve: () => void, reject: (err: Error) => void }} */
    let settle = { resolve: () => {}, reject: () => {} };
    const done = new Promise((resolve, reject) => { settle = { resolve: () => resolve(undefined), reject }; });
    this.pending.set(id, { ...settle, done });
    this.thread().postMessage({ id, temp, target, data, makeDir });
    return done;
  }

  /** @returns {Worker} */
  thread() {
    if (this.worker) return this.worker;
    const worker = new Worker(new URL('./file-writer-thread.js', import.meta.url));
    worker.unref(); // a writer never keeps the process alive
    worker.on('message', (/** @type {{ id: number, error?: string }} */ { id, error }) => {
      const waiting = this.pending.get(id);
      this.pending.delete(id);
      if (error) waiting?.reject(new Error(error));
      else waiting?.resolve();
    });
    const fail = (/** @type {Error} */ err) => {
      if (this.worker !== worker) return;
      this.worker = null;
      for (const waiting of this.pending.values()) waiting.reject(err);
      this.pending.clear();
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`file writer thread exited with ${code}`)));
    this.worker = worker;
    return worker;
  }

  /** Lets the writes already sent land (at most `waitMs`), then stops the thread. */
  async close(waitMs = 2000) {
    const writes = [...this.pending.values()].map((waiting) => waiting.done);
    let timer;
    await Promise.race([Promise.allSettled(writes), new Promise((resolve) => { timer = setTimeout(resolve, waitMs); })]);
    clearTimeout(timer);
    const worker = this.worker;
    this.worker = null;
    await worker?.terminate();
  }
}
