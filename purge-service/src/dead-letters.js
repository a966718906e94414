import { timingSafeEqual } from 'node:crypto';
import express from 'express';
import { HttpError } from '@stack/lib';
import { fieldsOf } from './purge/stream.js';

/**
 * The dead-letter stream: list what failed, and put it back on the purge stream.
 * @param {import('ioredis').Redis} redis @param {{ PURGE_STREAM: string, PURGE_DEAD_STREAM: string }} config
 */
export function deadLetters(redis, config) {
  return {
    /** @param {number} count */
    async list(count) {
      const entries = await redis.xrange(config.PURGE_DEAD_STREAM, '-', '+', 'COUNT', count);
      return entries.map(([id, fields]) => ({ id, ...fieldsOf(fields) }));
    },
    /** Moves up to `count` dead letters back to the purge stream (add, then delete: never lost). @param {number} count */
    async replay(count) {
      const entries = await redis.xrange(config.PURGE_DEAD_STREAM, '-', '+', 'COUNT', count);
      for (const [id, fields] of entries) {
        // the event as it was queued (an avatar change or a takedown), without the failure's notes
        const { original_id: _id, failed_target: _target, error: _error, ...event } = fieldsOf(fields);
        Object.assign(event, { source: 'replay', at: String(Date.now()) });
        await redis
          .multi()
          .xadd(config.PURGE_STREAM, '*', ...Object.entries(event).flat())
          .xdel(config.PURGE_DEAD_STREAM, id)
          .exec();
      }
      return entries.length;
    },
  };
}

/**
 * Every /admin path: the admin Bearer token (compared in constant time), or a 401; off (404) without one.
 * @param {import('@stack/lib/src/config-types.js').PurgeServiceConfig} config @returns {import('express').RequestHandler}
 */
export function adminAuth(config) {
  const token = Buffer.from(`Bearer ${config.PURGE_ADMIN_TOKEN}`);
  return (req, res, next) => {
    res.locals.route = 'admin';
    if (!config.PURGE_ADMIN_TOKEN) return next(new HttpError(404, 'admin_disabled'));
    const given = Buffer.from(req.headers.authorization || '');
    if (given.length !== token.length || !timingSafeEqual(given, token))
      return next(new HttpError(401, 'unauthorized', {}, { 'WWW-Authenticate': 'Bearer' }));
    return next();
  };
}

/**
 * GET /admin/dead-letters and POST /admin/dead-letters/replay (behind adminAuth).
 * @param {import('ioredis').Redis} redis @param {import('@stack/lib/src/config-types.js').PurgeServiceConfig} config
 */
export function deadLetterRouter(redis, config) {
  const router = express.Router();
  const letters = deadLetters(redis, /** @type {any} */ (config));
  router.get('/admin/dead-letters', async (req, res, next) => {
    try {
      res
        .set('Cache-Control', 'no-store')
        .json({ dead_letters: await letters.list(Math.min(Number(req.query.count) || 100, 1000)) });
    } catch (err) {
      next(err);
    }
  });
  router.post('/admin/dead-letters/replay', async (req, res, next) => {
    try {
      res
        .set('Cache-Control', 'no-store')
        .json({ replayed: await letters.replay(Math.min(Number(req.query.count) || 1000, 10000)) });
    } catch (err) {
      next(err);
    }
  });
  return router;
}
