import dns from 'node:dns/promises';
import { Pool } from 'undici';
import { avatarPaths } from '@stack/lib';

const KEYS_PER_REQUEST = 100; // keeps the xkey header well under varnish's http_req_hdr_len (8 KB)

/**
 * Every varnish node: an xkey purge of `avatar:<account>` and other tags (many per request) and, for objects
 * stored without tags, a PURGE of each avatar URL. A node name that resolves to several addresses
 * (Compose, Kubernetes) purges every address; `unix:<path>` is a node's purge socket (this stack's own
 * varnish, which checks that the peer is the purge service's user).
 * @param {{ nodes: string[], soft: boolean, timeoutMs: number }} options
 */
export function createVarnishTarget({ nodes, soft, timeoutMs }) {
  /** @type {Map<string, Pool>} */
  const pools = new Map();
  /** @param {string} origin */
  const pool = (origin) => {
    let found = pools.get(origin);
    if (!found) {
      const socketPath = origin.startsWith('unix:') ? origin.slice(5) : undefined;
      found = new Pool(socketPath ? 'http://varnish' : origin, {
        connections: 16,
        // an idle connection closed from this end before varnish's timeout_idle (VARNISH_IDLE_S, at least 6 s)
        // ends it, so a purge is never sent on one varnish is closing
        keepAliveTimeout: 4_000,
        keepAliveMaxTimeout: 4_000,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
        ...(socketPath ? { socketPath } : {}),
      });
      pools.set(origin, found);
    }
    return found;
  };

  async function addresses() {
    const all = await Promise.all(
      nodes.map(async (node) => {
        if (node.startsWith('unix:')) return [node];
        const [host, port] = node.split(':');
        const found = await dns.lookup(host, { all: true });
        return found.map(({ address, family }) => `http://${family === 6 ? `[${address}]` : address}:${port || 80}`);
      }),
    );
    return [...new Set(all.flat())];
  }

  /** @param {string} origin @param {string} path @param {Record<string, string>} [headers] */
  async function send(origin, path, headers = {}) {
    const response = await pool(origin).request({
      method: 'PURGE',
      path,
      headers,
      signal: AbortSignal.timeout(timeoutMs),
    });
    await response.body.dump();
    if (response.statusCode !== 200 && response.statusCode !== 404)
      throw new Error(`varnish ${origin} answered ${response.statusCode} to PURGE ${path}`);
  }

  /**
   * One node: the xkeys (many per request) and a PURGE of each path. @param {string} origin
   * @param {string[]} xkeys @param {string[]} paths
   */
  async function purgeNode(origin, xkeys, paths) {
    const calls = [];
    for (let start = 0; start < xkeys.length; start += KEYS_PER_REQUEST) {
      const keys = xkeys.slice(start, start + KEYS_PER_REQUEST).join(' ');
      calls.push(send(origin, '/', soft ? { xkey: keys, 'xkey-soft': '1' } : { xkey: keys }));
    }
    for (const path of paths) calls.push(send(origin, path));
    await Promise.all(calls);
  }

  /**
   * Every node at once; what one node could not take is returned (`failed`: its address), never thrown, so a
   * node that is down holds up neither the others nor the CDN (see node-queue.js).
   * @param {Map<string, 'avatar'|'cover'|'both'>} kinds account → what changed
   * @param {string[]} [tags] more xkeys (a takedown's `img:<id>`)
   */
  async function purge(kinds, tags = []) {
    const accounts = [...kinds.keys()];
    const paths = accounts.flatMap((account) => avatarPaths(account, /** @type {any} */ (kinds.get(account))));
    const xkeys = [...accounts.map((account) => `avatar:${account}`), ...tags];
    /** @type {string[]} */
    const failed = [];
    await Promise.all(
      (await addresses()).map((origin) => purgeNode(origin, xkeys, paths).catch(() => failed.push(origin))),
    );
    return { xkeys, paths, failed };
  }

  /**
   * At start: a purge of a tag nothing carries, a few at once on every node, so that the first real purges
   * find connections open; says which nodes refused it or were away (an address missing from a node's
   * VARNISH_PURGERS shows here, not at the first avatar change). @returns {Promise<string[]>}
   */
  async function warm(connections = 4) {
    /** @type {string[]} */
    const refused = [];
    await Promise.all(
      (await addresses()).map(async (origin) => {
        try {
          await Promise.all(Array.from({ length: connections }, () => send(origin, '/', { xkey: 'stack-warm-up' })));
        } catch (err) {
          refused.push(`${origin}: ${/** @type {Error} */ (err).message}`);
        }
      }),
    );
    return refused;
  }

  return { purge, purgeNode, addresses, warm, close: () => Promise.all([...pools.values()].map((p) => p.close())) };
}
