import http from 'node:http';

/**
 * A local HAF proxy-whitelist service speaking its PostgREST wire format, as images.hive.blog calls it
 * (imagehoster src/whitelist.ts checkUrl): POST /whitelist/check with `{"url": …}` answers a JSON string,
 * "whitelisted", "blacklisted" or "unknown". It records every URL asked; `setDown(true)` answers 503.
 */
export async function startHafWhitelist() {
  /** @type {Map<string, 'whitelisted' | 'blacklisted'>} */
  const statuses = new Map();
  /** @type {string[]} */
  const asked = [];
  let down = false;
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      if (down) return res.writeHead(503, { 'content-type': 'application/json' }).end('{"message":"down"}');
      if (req.method !== 'POST' || req.url !== '/whitelist/check')
        return res.writeHead(404, { 'content-type': 'application/json' }).end('{"message":"not found"}');
      const { url } = JSON.parse(body || '{}');
      asked.push(url);
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(statuses.get(url) ?? 'unknown'));
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(null)));
  const { port } = /** @type {import('node:net').AddressInfo} */ (server.address());
  return {
    url: `http://127.0.0.1:${port}`,
    asked,
    /** @param {string} url @param {'whitelisted' | 'blacklisted'} status */
    set: (url, status) => statuses.set(url, status),
    /** @param {boolean} value */
    setDown: (value) => {
      down = value;
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(resolve);
      }),
  };
}
