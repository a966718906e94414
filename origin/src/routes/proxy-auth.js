import { createHash, randomBytes } from 'node:crypto';
import express from 'express';
import { HttpError, isAccountName, paramsOf } from '@stack/lib';

/** Where a preview token lives (images.hive.blog's key, src/proxy-auth.ts). @param {string} token */
export const previewTokenKey = (token) => `proxy:auth:token:${token}`;

/** Whether `text` has a preview token's shape (24 random bytes in hex, as this route issues them). @param {unknown} text */
export const isPreviewToken = (text) => typeof text === 'string' && /^[0-9a-f]{48}$/.test(text);

/** What the editor signs with the account's posting key. @param {string} account @param {number} timestamp ms */
export function previewChallenge(account, timestamp) {
  return `Authorize image proxy preview for ${account} at ${new Date(timestamp).toISOString()}`;
}

/** @param {unknown} body @param {number} skewMs @returns {number} */
function timestampOf(body, skewMs) {
  const timestamp = body && typeof body === 'object' ? /** @type {any} */ (body).timestamp : undefined;
  if (typeof timestamp !== 'number' || !Number.isFinite(timestamp)) {
    throw new HttpError(400, 'invalid_parameter', {
      name: 'timestamp',
      reason: 'a JSON body {"timestamp": <ms since 1970>}',
    });
  }
  if (Math.abs(Date.now() - timestamp) >= skewMs) {
    throw new HttpError(400, 'invalid_parameter', {
      name: 'timestamp',
      reason: `more than ${skewMs / 1000} s from this server's clock`,
    });
  }
  return timestamp;
}

/**
 * POST /proxy-auth/<account>/<signature> {"timestamp": ms}: condenser's editor proves it holds the
 * account's posting key (a signature over sha256 of previewChallenge) and gets a short-lived token it
 * appends to preview URLs (`?token=`), as images.hive.blog answers it: {token, expires_in}, the token in
 * Redis with its lifetime. Never cached anywhere (`private, no-store`). This stack proxies every public
 * image, so the token opens nothing more: varnish leaves it out of its cache key and the origin ignores it.
 * @param {{ config: import('@stack/lib/src/config-types.js').OriginConfig, redis: import('ioredis').Redis,
 *   verifySignature: import('../uploads/hive-auth.js').VerifySignature }} deps
 * @returns {import('express').RequestHandler[]}
 */
export function proxyAuthRoute({ config, redis, verifySignature }) {
  const ttl = config.PREVIEW_TOKEN_TTL_S;
  const handler = /** @type {import('express').RequestHandler} */ (
    async (req, res, next) => {
      res.locals.route = 'proxy_auth';
      res.set('Cache-Control', 'private, no-store');
      const { account, signature } = paramsOf(req);
      try {
        if (!isAccountName(account)) throw new HttpError(400, 'invalid_account', { account: account.slice(0, 32) });
        const timestamp = timestampOf(req.body, config.PREVIEW_CLOCK_SKEW_S * 1000);
        const digest = createHash('sha256').update(previewChallenge(account, timestamp)).digest();
        await verifySignature(account, signature, digest, ['posting']);
        const token = randomBytes(24).toString('hex');
        await redis.set(previewTokenKey(token), account, 'EX', ttl).catch(() => {
          throw new HttpError(503, 'unavailable', { reason: 'token store' }, { 'Retry-After': '5' });
        });
        res.json({ token, expires_in: ttl });
      } catch (err) {
        next(err);
      }
    }
  );
  return [express.json({ limit: '1kb', type: () => true }), handler];
}
