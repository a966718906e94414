/**
 * One piece of work per key: callers asking for a key already in progress share its promise.
 * @param {(kind: string) => void} onJoin called when a caller joins work already in flight
 */
export function createSingleFlight(onJoin) {
  /** @type {Map<string, Promise<any>>} */
  const inFlight = new Map();
  /**
   * @template T
   * @param {string} kind metric label (fetch, transform)
   * @param {string} key
   * @param {() => Promise<T>} work
   * @returns {Promise<T>}
   */
  function run(kind, key, work) {
    const fullKey = `${kind}:${key}`;
    const running = inFlight.get(fullKey);
    if (running) {
      onJoin(kind);
      return running;
    }
    const promise = work().finally(() => inFlight.delete(fullKey));
    inFlight.set(fullKey, promise);
    return promise;
  }
  /** Whether work for the key is in progress (a call now would join it). @param {string} kind @param {string} key */
  const has = (kind, key) => inFlight.has(`${kind}:${key}`);
  return Object.assign(run, { has });
}
