/**
 * Work nobody is waiting for (an AVIF made after its first visitor got a WebP): it runs only on idle
 * transform capacity, one job at a time, and never ahead of a request. Jobs wait in a bounded list, one per
 * key; past the bound a new one is dropped, and when the transform queue is full every waiting job is
 * dropped (under load the first answers stay as they are). A dropped job is asked again by the next
 * request that gets the fallback.
 * @param {{ queue: import('./queue.js').TransformQueue, maxPending: number, pollMs?: number,
 *   onResult: (result: 'done' | 'dropped' | 'failed', err?: unknown) => void, onChange?: (jobs: number) => void }} options
 *   onChange: jobs waiting or running, after every change
 */
export function createBackground({ queue, maxPending, pollMs = 100, onResult, onChange = () => {} }) {
  /** @type {Map<string, () => Promise<unknown>>} */
  const pending = new Map();
  let running = false;
  /** the key of the job running now */
  let current = '';
  /** @type {NodeJS.Timeout | null} */
  let timer = null;

  function dropAll() {
    for (const key of pending.keys()) {
      pending.delete(key);
      onResult('dropped');
    }
  }

  function pump() {
    if (queue.full) dropAll();
    onChange(pending.size + (running ? 1 : 0));
    if (running || !pending.size) return;
    if (!queue.idle) {
      timer ??= setTimeout(() => {
        timer = null;
        pump();
      }, pollMs).unref();
      return;
    }
    const [key, job] = /** @type {[string, () => Promise<unknown>]} */ (pending.entries().next().value);
    pending.delete(key);
    running = true;
    current = key;
    onChange(pending.size + 1);
    job()
      .then(
        () => onResult('done'),
        (err) => onResult('failed', err),
      )
      .finally(() => {
        running = false;
        current = '';
        pump();
      });
  }

  return {
    /** @param {string} key @param {() => Promise<unknown>} job */
    add(key, job) {
      if (pending.has(key) || key === current) return;
      if (pending.size >= maxPending || queue.full) {
        onResult('dropped');
        return;
      }
      pending.set(key, job);
      pump();
    },
  };
}
