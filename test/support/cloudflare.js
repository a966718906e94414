import http from 'node:http';

/**
 * A local server speaking Cloudflare's purge API (POST /client/v4/zones/<zone>/purge_cache {"files":[…]}).
 * It records every call; `failNext(status, n)` makes the next n calls fail with that status.
 */
export async function startCloudflare() {
  /** @type {Array<{ zone: string, files: string[], authorization: string | undefined, status: number }>} */
  const calls = [];
  /** @type {Array<number>} */
  let failures = [];
  let alwaysFail = 0;
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      const match = /^\/client\/v4\/zones\/([^/]+)\/purge_cache$/.exec(req.url || '');
      if (req.method !== 'POST' || !match) return res.writeHead(404).end();
      const status = failures.shift() || alwaysFail || 200;
      const files = JSON.parse(body).files;
      calls.push({ zone: match[1], files, authorization: req.headers.authorization, status });
      const headers = { 'content-type': 'application/json', ...(status === 429 ? { 'retry-after': '1' } : {}) };
      const reply = status === 200
        ? { success: true, errors: [], messages: [], result: { id: 'purge' } }
        : { success: false, errors: [{ code: status === 429 ? 10000 : 1000, message: 'failed' }], messages: [], result: null };
      res.writeHead(status, headers).end(JSON.stringify(reply));
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
    /** Every URL purged successfully. */
    purged: () => calls.filter((call) => call.status === 200).flatMap((call) => call.files),
    close: () => new Promise((resolve) => {
      server.closeAllConnections();
      server.close(resolve);
    }),
  };
}
