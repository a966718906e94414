// Requests on one connection, kept alive: each after the first goes on the same socket, as haproxy reuses its
// connections to a service; a request with no answer in 10 s fails (a connection left stalled by the answer
// before it).
import http from 'node:http';

/**
 * @typedef {{ status: number, headers: http.IncomingHttpHeaders, body: Buffer }} Answer
 */

/** One kept-alive connection: `ask(method, url, headers, body)`; `agent.destroy()` ends it. */
export function keptAlive() {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  /**
   * @param {string} method @param {string} url @param {Record<string, string | number>} [headers]
   * @param {Buffer} [body] @returns {Promise<Answer>}
   */
  const ask = (method, url, headers = {}, body = undefined) =>
    new Promise((resolve, reject) => {
      const req = http.request(url, { method, agent, headers }, (res) => {
        const chunks = /** @type {Buffer[]} */ ([]);
        res.on('data', (chunk) => chunks.push(chunk));
        res.on('end', () =>
          resolve({ status: Number(res.statusCode), headers: res.headers, body: Buffer.concat(chunks) }),
        );
      });
      req.setTimeout(10_000, () =>
        req.destroy(new Error(`${method} ${url}: no answer in 10 s on a kept-alive connection`)),
      );
      req.on('error', reject);
      req.end(body);
    });
  return { ask, agent };
}
