import http from 'node:http';

/**
 * A local server speaking Cloudflare's purge API (POST /client/v4/zones/<zone>/purge_cache {"files":[…]}),
 * enforcing what the real one enforces: at most `maxFiles` URLs a call (400 past it) and a rate of calls
 * (a token bucket of `callsPerSecond` with `burst`; 429 with Retry-After when it is empty). It records every
 * call with its time; `failNext(status, n)` makes the next n calls fail with that status; `onCall` runs
 * before each answer (a test looks at the other caches at the moment the CDN is asked).
 * @param {{ maxFiles?: number, callsPerSecond?: number, burst?: number, retryAfterS?: number }} [limits]
 */
export async function startCloudflare({ maxFiles = 30, callsPerSecond = Infinity, burst = 1, retryAfterS = 1 } = {}) {
  /** @type {Array<{ zone: string, files: string[], authorization: string | undefined, status: number, at: number }>} */
  const calls = [];
  /** @type {Array<number>} */
  let failures = [];
  let alwaysFail = 0;
  let tokens = burst;
  let last = Date.now();
  /** @type {(files: string[]) => Promise<void>} */
  let onCall = async () => {};
  const rateLimited = () => {
    const now = Date.now();
    tokens = Math.min(burst, tokens + ((now - last) / 1000) * callsPerSecond);
    last = now;
    if (tokens < 1) return true;
    tokens -= 1;
    return false;
  };
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', async () => {
      const match = /^\/client\/v4\/zones\/([^/]+)\/purge_cache$/.exec(req.url || '');
      if (req.method !== 'POST' || !match) return res.writeHead(404).end();
      const at = Date.now();
      const files = JSON.parse(body).files;
      await onCall(files);
      const status = files.length > maxFiles ? 400 : rateLimited() ? 429 : failures.shift() || alwaysFail || 200;
      calls.push({ zone: match[1], files, authorization: req.headers.authorization, status, at });
      const headers = {
        'content-type': 'application/json',
        ...(status === 429 ? { 'retry-after': String(retryAfterS) } : {}),
      };
      const code = status === 429 ? 10000 : status === 400 ? 1015 : 1000;
      const reply =
        status === 200
          ? { success: true, errors: [], messages: [], result: { id: 'purge' } }
          : {
              success: false,
              errors: [{ code, message: status === 400 ? `at most ${maxFiles} files a call` : 'failed' }],
              messages: [],
              result: null,
            };
      return res.writeHead(status, headers).end(JSON.stringify(reply));
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(null)));
  const { port } = /** @type {import('node:net').AddressInfo} */ (server.address());
  return {
    base: `http://127.0.0.1:${port}/client/v4`,
    calls,
    /** @param {number} status @param {number} count */
    failNext(status, count) {
      failures = Array(count).fill(status);
    },
    /** @param {number} status 0 to stop */
    failAlways(status) {
      alwaysFail = status;
    },
    /** @param {(files: string[]) => Promise<void>} hook */
    onCall(hook) {
      onCall = hook;
    },
    /** Every URL purged successfully. */
    purged: () => calls.filter((call) => call.status === 200).flatMap((call) => call.files),
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(resolve);
      }),
  };
}
