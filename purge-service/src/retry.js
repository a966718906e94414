/**
 * Runs `work` until it succeeds or `attempts` are spent, waiting base·2ⁿ (capped, with full jitter between
 * half and all of it) between tries. A thrown error may carry `retryAfterMs` (e.g. from a 429) to wait that.
 * @template T
 * @param {() => Promise<T>} work
 * @param {{ attempts: number, baseMs: number, maxMs: number, onRetry?: (err: unknown, attempt: number) => void }} options
 * @returns {Promise<T>}
 */
export async function retry(work, { attempts, baseMs, maxMs, onRetry = () => {} }) {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await work();
    } catch (err) {
      if (attempt >= attempts) throw err;
      onRetry(err, attempt);
      const backoff = Math.min(maxMs, baseMs * 2 ** (attempt - 1));
      // a server's Retry-After is honoured even past maxMs (asking again sooner only earns another
      // refusal), up to 5 minutes (a broken one must not park a worker for a day)
      const retryAfter = Math.min(/** @type {any} */ (err)?.retryAfterMs || 0, 300_000);
      const wait = Math.max(retryAfter, Math.min(maxMs, backoff * (0.5 + Math.random() / 2)));
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }
}
