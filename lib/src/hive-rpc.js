import { request } from 'undici';
import { jsonWithin } from './json-within.js';

// a Hive API answer's bound: a batch of accounts with their metadata, a block's operations, is a few MB at most
const MAX_ANSWER_BYTES = 32 * 2 ** 20;

/**
 * JSON-RPC 2.0 to a list of Hive API nodes with failover: each call tries the nodes in turn, starting
 * from the last one that answered.
 * @param {{ urls: string[], timeoutMs: number }} options
 */
export function createHiveClient({ urls, timeoutMs }) {
  let preferred = 0;
  let nextId = 1;
  /**
   * @param {string} method e.g. condenser_api.get_accounts
   * @param {unknown} params
   * @returns {Promise<any>}
   */
  async function call(method, params) {
    let lastError = new Error('no Hive API node configured');
    for (let attempt = 0; attempt < urls.length; attempt += 1) {
      const index = (preferred + attempt) % urls.length;
      try {
        const result = await callNode(urls[index], method, params);
        preferred = index;
        return result;
      } catch (err) {
        lastError = /** @type {Error} */ (err);
        if (/** @type {any} */ (err).rpcError) throw err; // the node answered: another node would say the same
      }
    }
    throw lastError;
  }
  /** @param {string} url @param {string} method @param {unknown} params */
  async function callNode(url, method, params) {
    const body = JSON.stringify({ jsonrpc: '2.0', method, params, id: nextId++ });
    const response = await request(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (response.statusCode !== 200) {
      await response.body.dump();
      throw new Error(`hive node ${url} answered ${response.statusCode}`);
    }
    const reply = await jsonWithin(response.body, MAX_ANSWER_BYTES, `hive node ${url}`);
    if (reply.error)
      throw Object.assign(new Error(`hive rpc error: ${reply.error.message}`), { rpcError: reply.error });
    return reply.result;
  }
  return { call };
}
