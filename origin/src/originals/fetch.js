import { createWriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import ipaddr from 'ipaddr.js';
import { Agent, request } from 'undici';
import { HttpError, storageFull } from '@stack/lib';
import { bareHost, isForbiddenAddress, safeLookup } from './ssrf.js';

/**
 * A fetch failure, with whether it is permanent (remember long) or transient (remember briefly).
 * @param {number} status @param {string} name @param {boolean} permanent @param {Record<string, unknown>} [info]
 */
export function fetchError(status, name, permanent, info = {}) {
  return new FetchError(status, name, permanent, info);
}

/** A remote fetch's failure, permanent (a 404, too big: remembered long) or transient (remembered briefly). */
export class FetchError extends HttpError {
  /** @param {number} status @param {string} name @param {boolean} permanent @param {Record<string, unknown>} [info] */
  constructor(status, name, permanent, info = {}) {
    super(status, name, info);
    this.permanent = permanent;
  }
}

/**
 * Checks a URL before any connection: http(s) only, no credentials, and literal addresses judged here
 * (sockets skip DNS for them, so safeLookup cannot see them).
 * @param {string} text @param {Set<string>} allowedHosts
 * @returns {URL}
 */
export function checkTarget(text, allowedHosts) {
  let url;
  try {
    url = new URL(text);
  } catch {
    throw fetchError(400, 'invalid_url', true);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw fetchError(400, 'invalid_url', true, { reason: 'only http and https' });
  if (url.username || url.password) throw fetchError(400, 'invalid_url', true, { reason: 'credentials in URL' });
  const host = bareHost(url.hostname);
  if (!allowedHosts.has(url.hostname) && ipaddr.isValid(host) && isForbiddenAddress(host)) {
    throw fetchError(403, 'forbidden_target', true);
  }
  return url;
}

/**
 * @param {{ maxBytes: number, connectTimeoutMs: number, responseTimeoutMs: number, totalTimeoutMs: number,
 *   maxRedirects: number, allowedHosts: string[], userAgent: string }} options
 */
export function createFetcher(options) {
  const allowedHosts = new Set(options.allowedHosts);
  const agent = new Agent({
    connect: { timeout: options.connectTimeoutMs, lookup: safeLookup(allowedHosts) },
    headersTimeout: options.responseTimeoutMs,
    bodyTimeout: options.responseTimeoutMs,
    connections: 64,
  });

  /** @param {URL} url @param {AbortSignal} signal */
  async function requestOnce(url, signal) {
    try {
      return await request(url, {
        dispatcher: agent,
        signal,
        headers: { 'user-agent': options.userAgent, accept: 'image/*,*/*;q=0.5' },
      });
    } catch (err) {
      throw classify(err);
    }
  }

  /**
   * Fetches `text` into `destination`, following at most maxRedirects redirects, each re-checked.
   * @param {string} text @param {string} destination
   * @returns {Promise<{ bytes: number, url: string }>}
   */
  async function fetchTo(text, destination) {
    const signal = AbortSignal.timeout(options.totalTimeoutMs);
    let url = checkTarget(text, allowedHosts);
    for (let hops = 0; ; hops += 1) {
      const response = await requestOnce(url, signal);
      const location = response.headers.location;
      if (response.statusCode >= 300 && response.statusCode < 400 && location) {
        await response.body.dump().catch(() => {});
        if (hops >= options.maxRedirects) throw fetchError(400, 'too_many_redirects', true);
        url = checkTarget(new URL(String(location), url).toString(), allowedHosts);
        continue;
      }
      if (response.statusCode !== 200) {
        await response.body.dump().catch(() => {});
        throw upstreamStatus(response.statusCode);
      }
      const length = Number(response.headers['content-length']);
      if (length > options.maxBytes) {
        response.body.destroy();
        throw fetchError(400, 'image_too_large', true, { limit: options.maxBytes });
      }
      const bytes = await saveBody(response.body, destination, options.maxBytes);
      return { bytes, url: url.toString() };
    }
  }

  return { fetchTo, close: () => agent.close() };
}

/** @param {number} status */
function upstreamStatus(status) {
  if (status === 404 || status === 410) return fetchError(404, 'upstream_not_found', true, { upstream_status: status });
  if (status >= 400 && status < 500 && status !== 408 && status !== 429) {
    return fetchError(404, 'upstream_refused', true, { upstream_status: status });
  }
  return fetchError(502, 'upstream_error', false, { upstream_status: status });
}

/** Streams the body to disk, counting bytes: past the limit the fetch is cut, not buffered. @param {import('node:stream').Readable} body @param {string} destination @param {number} maxBytes */
async function saveBody(body, destination, maxBytes) {
  let bytes = 0;
  const limit = new Transform({
    transform(chunk, _encoding, done) {
      bytes += chunk.length;
      if (bytes > maxBytes) done(fetchError(400, 'image_too_large', true, { limit: maxBytes }));
      else done(null, chunk);
    },
  });
  try {
    await pipeline(body, limit, createWriteStream(destination));
  } catch (err) {
    await fs.rm(destination, { force: true });
    throw classify(err);
  }
  if (bytes === 0) throw fetchError(400, 'invalid_image', true, { reason: 'empty body' });
  return bytes;
}

/** @param {unknown} err @returns {HttpError} */
function classify(err) {
  if (err instanceof HttpError) return err;
  // our own disk, not the upstream
  const full = storageFull(err);
  if (full) return full;
  const anyErr = /** @type {any} */ (err);
  const code = anyErr?.code || anyErr?.cause?.code || anyErr?.name;
  if (code === 'EFORBIDDEN') return fetchError(403, 'forbidden_target', true);
  if (code === 'ENOTFOUND') return fetchError(404, 'upstream_not_found', true, { reason: 'unknown host' });
  // undici's UND_ERR_HEADERS_TIMEOUT, UND_ERR_BODY_TIMEOUT, UND_ERR_CONNECT_TIMEOUT; the only abort is the
  // total timeout's signal (UND_ERR_ABORTED, or its reason: a DOMException named TimeoutError, code 23)
  const names = [anyErr?.code, anyErr?.name, anyErr?.cause?.code, anyErr?.cause?.name].join(' ');
  if (/timeout|ETIMEDOUT|abort/i.test(names)) return fetchError(504, 'upstream_timeout', false);
  // the errno stays in the log (a port scan through /p/ must not read open, closed and filtered apart)
  return Object.assign(fetchError(502, 'upstream_error', false, { reason: 'connection failed' }), {
    code: String(code || ''),
  });
}
