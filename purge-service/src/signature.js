import { createHmac, timingSafeEqual } from 'node:crypto';
import { HttpError } from '@stack/lib';

/**
 * The webhook signature: hex HMAC-SHA256 of `<timestamp>.<raw body>`, so the timestamp cannot be changed
 * without the key (a replay with a fresh timestamp fails). Sent as `X-Signature: sha256=<hex>` with
 * `X-Timestamp: <unix seconds>`.
 * @param {string} key @param {string} timestamp @param {Buffer} body
 */
export function sign(key, timestamp, body) {
  return createHmac('sha256', key).update(`${timestamp}.`).update(body).digest('hex');
}

/**
 * Checks the signature and the timestamp window; returns the signature (the caller refuses its replay).
 * @param {{ keys: string[], toleranceS: number }} options
 */
export function createVerifier({ keys, toleranceS }) {
  /** @param {Record<string, string | string[] | undefined>} headers @param {Buffer} body @returns {string} */
  return function verify(headers, body) {
    const timestamp = String(headers['x-timestamp'] || '');
    const given = /^sha256=([0-9a-f]{64})$/.exec(String(headers['x-signature'] || ''))?.[1];
    if (!given || !/^\d{9,11}$/.test(timestamp))
      throw new HttpError(401, 'invalid_signature', { reason: 'missing or malformed X-Signature / X-Timestamp' });
    if (Math.abs(Date.now() / 1000 - Number(timestamp)) > toleranceS)
      throw new HttpError(401, 'invalid_signature', { reason: 'timestamp outside the tolerance window' });
    const givenBytes = Buffer.from(given, 'hex');
    const valid = keys.some((key) => timingSafeEqual(Buffer.from(sign(key, timestamp, body), 'hex'), givenBytes));
    if (!valid) throw new HttpError(401, 'invalid_signature', { reason: 'signature does not match' });
    return given;
  };
}
