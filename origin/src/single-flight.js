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
  return function run(kind, key, work) {
    const fullKey = `${kind}:${key}`;
    const running = inFlight.get(fullKey);
    if (running) {
      onJoin(kind);
      return running;
    }
    const promise = work().finally(() => inFlight.delete(fullKey));
    inFlight.set(fullKey, promise);
    return promise;
  };
}
