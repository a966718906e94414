/**
 * Work nobody is waiting for (an AVIF made after its first visitor got a WebP): it runs only on idle
 * transform capacity, at most `concurrency` jobs at a time (one started only while no request waits and more
 * slots are free than jobs of its own run), and never ahead of a request. Jobs wait in a bounded list, one
 * per key; past the bound a new one is dropped, and when the transform queue is full every waiting job is
 * dropped (under load the first answers stay as they are). A dropped job is asked again by the next request
 * that gets the fallback.
 * @param {{ queue: import('./queue.js').TransformQueue, concurrency?: number, maxPending: number, pollMs?: number,
 *   onResult: (result: 'done' | 'dropped' | 'failed', err?: unknown) => void, onChange?: (jobs: number) => void }} options
 *   concurrency: jobs at once (BACKGROUND_ENCODES: half the cores by default); onChange: jobs waiting or
 *   running, after every change
 */
export function createBackground({ queue, concurrency = 1, maxPending, pollMs = 100, onResult, onChange = () => {} }) {
  /** @type {Map<string, () => Promise<unknown>>} */
  const pending = new Map();
  /** the keys of the jobs running now */
  const running = new Set();
  /** @type {NodeJS.Timeout | null} */
  let timer = null;

  function dropAll() {
    for (const key of pending.keys()) {
      pending.delete(key);
      onResult('dropped');
    }
  }

  /**
   * Starts the next jobs while fewer than `concurrency` run and the queue has more free slots than jobs
   * running here (each of which holds one, or soon will: its original is fetched before it asks for a slot).
   */
  function pump() {
    if (queue.full) dropAll();
    while (pending.size && running.size < concurrency) {
      if (queue.freeSlots <= running.size) {
        timer ??= setTimeout(() => {
          timer = null;
          pump();
        }, pollMs).unref();
        break;
      }
      start();
    }
    onChange(pending.size + running.size);
  }

  function start() {
    const [key, job] = /** @type {[string, () => Promise<unknown>]} */ (pending.entries().next().value);
    pending.delete(key);
    running.add(key);
    job()
      .then(
        () => onResult('done'),
        (err) => onResult('failed', err),
      )
      .finally(() => {
        running.delete(key);
        pump();
      });
  }

  return {
    /** @param {string} key @param {() => Promise<unknown>} job */
    add(key, job) {
      if (pending.has(key) || running.has(key)) return;
      if (pending.size >= maxPending || queue.full) {
        onResult('dropped');
        return;
      }
      pending.set(key, job);
      pump();
    },
  };
}
