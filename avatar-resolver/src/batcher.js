/**
 * DataLoader-style batching with single-flight: concurrent loads of one key share a promise; loads of
 * different keys arriving within `waitMs` go out together, at most `maxBatch` keys per call.
 * @template V
 * @param {{ load: (keys: string[]) => Promise<Map<string, V>>, waitMs: number, maxBatch: number }} options
 */
export function createBatcher({ load, waitMs, maxBatch }) {
  /** @type {Map<string, Promise<V | undefined>>} */
  const pending = new Map();
  /** @type {Array<{ key: string, resolve: (value: V | undefined) => void, reject: (err: unknown) => void }>} */
  let queue = [];
  /** @type {NodeJS.Timeout | null} */
  let timer = null;

  function flush() {
    timer = null;
    const batch = queue;
    queue = [];
    for (let start = 0; start < batch.length; start += maxBatch) dispatch(batch.slice(start, start + maxBatch));
  }

  /** @param {typeof queue} batch */
  async function dispatch(batch) {
    try {
      const found = await load(batch.map((entry) => entry.key));
      for (const entry of batch) entry.resolve(found.get(entry.key));
    } catch (err) {
      for (const entry of batch) entry.reject(err);
    } finally {
      for (const entry of batch) pending.delete(entry.key);
    }
  }

  /** @param {string} key @returns {Promise<V | undefined>} undefined when the source does not know the key */
  return function loadOne(key) {
    const running = pending.get(key);
    if (running) return running;
    const promise = new Promise((resolve, reject) => {
      queue.push({ key, resolve, reject });
      if (queue.length >= maxBatch) {
        if (timer) clearTimeout(timer);
        flush();
      } else if (!timer) {
        timer = setTimeout(flush, waitMs);
      }
    });
    pending.set(key, /** @type {Promise<V | undefined>} */ (promise));
    return /** @type {Promise<V | undefined>} */ (promise);
  };
}
