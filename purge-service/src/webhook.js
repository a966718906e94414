import express from 'express';
import { HttpError, enqueuePurge, imageUrl, isAccountName } from '@stack/lib';
import { createVerifier } from './signature.js';

const KINDS = new Set(['avatar', 'cover', 'both']);

/** @param {Buffer} raw @returns {import('@stack/lib/src/purge-queue.js').PurgeEvent} */
function parseEvent(raw) {
  let body;
  try {
    body = JSON.parse(raw.toString('utf8'));
  } catch {
    throw new HttpError(400, 'invalid_json');
  }
  if (!body || typeof body !== 'object' || Array.isArray(body))
    throw new HttpError(400, 'invalid_body', { reason: 'expected a JSON object' });
  if (typeof body.account !== 'string' || !isAccountName(body.account)) throw new HttpError(400, 'invalid_account');
  const kind = body.kind ?? 'both';
  if (!KINDS.has(kind)) throw new HttpError(400, 'invalid_parameter', { name: 'kind', allowed: [...KINDS] });
  for (const field of ['avatar', 'cover']) {
    if (body[field] != null && !imageUrl(body[field]))
      throw new HttpError(400, 'invalid_parameter', { name: field, reason: 'expected an http(s) URL' });
  }
  return {
    account: body.account,
    kind,
    avatar: body.avatar || undefined,
    cover: body.cover || undefined,
    source: 'webhook',
  };
}

/**
 * POST /hooks/avatar: HMAC-signed "this account's avatar changed". 202 only once the event is in Redis (and in
 * REDIS_ACK_REPLICAS replicas);
 * 401 bad signature, 409 replay, 400 malformed, 503 Redis unavailable (the caller retries).
 * @param {{ redis: import('ioredis').Redis, config: import('@stack/lib/src/config-types.js').PurgeServiceConfig, metrics: ReturnType<typeof import('./metrics.js').createPurgeMetrics> }} deps
 * @returns {import('express').Router}
 */
export function webhookRouter({ redis, config, metrics }) {
  const verify = createVerifier({ keys: config.PURGE_HMAC_KEYS, toleranceS: config.PURGE_TIMESTAMP_TOLERANCE_S });
  const router = express.Router();
  router.post('/hooks/avatar', express.raw({ type: () => true, limit: '16kb' }), async (req, res, next) => {
    res.locals.route = 'webhook';
    try {
      const raw = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
      const signature = verify(req.headers, raw);
      const event = parseEvent(raw);
      let id;
      try {
        id = await enqueuePurge(redis, config.PURGE_STREAM, event, {
          once: { key: `purge:sig:${signature}`, ttlS: config.PURGE_TIMESTAMP_TOLERANCE_S * 2 },
          durability: config,
        });
      } catch {
        throw new HttpError(503, 'unavailable', { reason: 'queue' }, { 'Retry-After': '5' });
      }
      if (!id) throw new HttpError(409, 'replayed', { reason: 'this signature was already accepted' });
      metrics.received.inc({ source: 'webhook', result: 'queued' });
      metrics.queued.inc({ source: 'webhook' });
      res.status(202).set('Cache-Control', 'no-store').json({ queued: id, account: event.account, kind: event.kind });
    } catch (err) {
      metrics.received.inc({ source: 'webhook', result: /** @type {any} */ (err).name || 'error' });
      next(err);
    }
  });
  return router;
}
