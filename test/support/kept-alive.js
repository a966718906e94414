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

/**
 * Whether a fetch failed because the kept-alive connection it went on was closed before any answer: by a FIN
 * (undici's "other side closed") or by a reset, when the request reached the closing socket unread
 * (ECONNRESET, seen in CI on 2026-12-02). nginx's and haproxy's old workers close their idle kept-alive
 * connections on a reload. @param {any} err
 */
const closedUnanswered = (err) => err?.cause?.code === 'UND_ERR_SOCKET' || err?.cause?.code === 'ECONNRESET';

/**
 * fetch(url, init) as a browser sends it: again, when the reused connection it went on was closed before any
 * answer (undici's fetch gives up), at most twice; `onAgain` is called each time. The pause before it lets
 * the client see the other idle connections that reload closed, so it goes on a live one or a new one. An
 * answer cut after its headers is never sent again: its body fails as it would in the browser.
 * @param {string} url @param {RequestInit} [init] @param {() => void} [onAgain] @returns {Promise<Response>}
 */
export async function fetchAsBrowser(url, init = {}, onAgain = () => {}) {
  for (let again = 0; ; again += 1) {
    try {
      return await fetch(url, init);
    } catch (err) {
      if (again === 2 || !closedUnanswered(err)) throw err;
      onAgain();
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}
