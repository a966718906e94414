import express from 'express';
import { HttpError } from '@stack/lib';
import { entriesOfBody } from './takedowns.js';

/** @param {unknown} value @param {string} name @param {boolean} required */
function text(value, name, required) {
  if (value === undefined && !required) return '';
  if (typeof value !== 'string' || (required && !value.trim()) || value.length > 1000) {
    throw new HttpError(400, 'invalid_parameter', {
      name,
      reason: `${required ? 'required: ' : ''}a string of at most 1000 characters`,
    });
  }
  return value.trim();
}

/**
 * The takedown admin API (behind the admin Bearer token, on the purge service's own port, never on the
 * public path): GET /admin/takedowns (what is in force), POST /admin/takedowns (block), DELETE
 * /admin/takedowns (unblock), GET /admin/takedowns/audit. A block or unblock is answered 202 once it is in
 * the list and its purge is queued (both on Redis' disk); every node enforces it within TAKEDOWN_POLL_MS.
 * @param {{ store: import('./takedowns.js').TakedownStore, config: import('@stack/lib/src/config-types.js').PurgeServiceConfig,
 *   metrics: ReturnType<typeof import('./metrics.js').createPurgeMetrics> }} deps
 */
export function takedownRouter({ store, config, metrics }) {
  const router = express.Router();
  const json = express.json({ limit: config.TAKEDOWN_BODY_MAX_BYTES });
  /** @param {import('express').Request} req @param {'add'|'remove'} mode */
  async function change(req, mode) {
    const body = req.body && typeof req.body === 'object' && !Array.isArray(req.body) ? req.body : null;
    if (!body) throw new HttpError(400, 'invalid_body', { reason: 'expected a JSON object' });
    const entries = entriesOfBody(body, store.unwrap, config.TAKEDOWN_MAX_ENTRIES);
    const reason = text(body.reason, 'reason', mode === 'add');
    const reference = text(body.reference, 'reference', false);
    const by = text(body.by, 'by', true);
    const result = await store.apply({ mode, source: 'admin', entries, by, reason, reference }).catch(unavailable);
    metrics.takedowns.inc({ action: mode === 'add' ? 'block' : 'unblock' }, result.changes.length);
    return result;
  }
  router.get('/admin/takedowns', async (_req, res, next) => {
    try {
      res.set('Cache-Control', 'no-store').json({ entries: await store.list().catch(unavailable) });
    } catch (err) {
      next(err);
    }
  });
  router.get('/admin/takedowns/audit', async (req, res, next) => {
    try {
      const count = Math.min(Math.max(Number.parseInt(String(req.query.count), 10) || 100, 1), 10000);
      res.set('Cache-Control', 'no-store').json({ audit: await store.audit(count).catch(unavailable) });
    } catch (err) {
      next(err);
    }
  });
  router.post('/admin/takedowns', json, async (req, res, next) => {
    try {
      res
        .status(202)
        .set('Cache-Control', 'no-store')
        .json(await change(req, 'add'));
    } catch (err) {
      next(err);
    }
  });
  router.delete('/admin/takedowns', json, async (req, res, next) => {
    try {
      res
        .status(202)
        .set('Cache-Control', 'no-store')
        .json(await change(req, 'remove'));
    } catch (err) {
      next(err);
    }
  });
  return router;
}

/** @returns {never} */
function unavailable() {
  throw new HttpError(503, 'unavailable', { reason: 'redis' }, { 'Retry-After': '5' });
}
