import { textWithin } from '@stack/lib';
import { request } from 'undici';

/** Cloudflare's answer to a purge is a few hundred bytes of JSON: anything past this is not it. */
const MAX_ANSWER_BYTES = 1024 * 1024;

/**
 * A token bucket: `rate` tokens a second, at most `burst` saved up; take() waits for one.
 * @param {number} rate @param {number} burst
 */
export function tokenBucket(rate, burst) {
  let tokens = burst;
  let last = Date.now();
  return async function take() {
    for (;;) {
      const now = Date.now();
      tokens = Math.min(burst, tokens + ((now - last) / 1000) * rate);
      last = now;
      if (tokens >= 1) {
        tokens -= 1;
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, Math.ceil(((1 - tokens) / rate) * 1000)));
    }
  };
}

/**
 * Cloudflare purge by URL: POST <base>/zones/<zone>/purge_cache {"files": [...]} with a Bearer token,
 * `perCall` URLs a call, within the plan's rate; a 429's Retry-After is honoured by the caller's retry. Each
 * call within `timeoutMs` and its answer within a megabyte.
 * @param {{ base: string, zone: string, token: string, perCall: number, callsPerSecond: number, burst: number, timeoutMs: number }} options
 */
export function createCloudflareTarget(options) {
  const take = tokenBucket(options.callsPerSecond, options.burst);
  /** @param {string[]} files */
  async function call(files) {
    await take();
    const response = await request(`${options.base}/zones/${options.zone}/purge_cache`, {
      method: 'POST',
      headers: { authorization: `Bearer ${options.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ files }),
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
      // the whole call, not each chunk: an answer that trickles in never ends otherwise
      signal: AbortSignal.timeout(options.timeoutMs),
    });
    const text = await textWithin(response.body, MAX_ANSWER_BYTES, 'cloudflare');
    if (response.statusCode === 429) {
      const seconds = Number(response.headers['retry-after']) || 1;
      throw Object.assign(new Error('cloudflare rate limited the purge'), { retryAfterMs: seconds * 1000 });
    }
    let body;
    try {
      body = JSON.parse(text);
    } catch {
      body = null;
    }
    if (response.statusCode !== 200 || !body?.success)
      throw new Error(`cloudflare purge failed: ${response.statusCode} ${text.slice(0, 200)}`);
  }
  return {
    /** Purges `urls`; the chunks already purged are not repeated when a later chunk fails. @param {string[]} urls @param {Set<string>} done */
    async purge(urls, done) {
      for (let start = 0; start < urls.length; start += options.perCall) {
        const files = urls.slice(start, start + options.perCall);
        const key = files.join(' ');
        if (done.has(key)) continue;
        await call(files);
        done.add(key);
      }
    },
  };
}
