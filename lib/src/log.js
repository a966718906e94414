import { randomUUID } from 'node:crypto';
import pino from 'pino';

/** @param {string} service @param {string} level */
export function createLogger(service, level) {
  return pino({ level, base: { service } });
}

const REQUEST_ID = /^[\w.:-]{1,128}$/;

/**
 * The request id nginx made (X-Request-Id), or a new one, echoed on the response and kept on the request.
 * nginx's access log is the request log: here each request is logged at debug, and 5xx answers at error,
 * both with the id, so the cost is nothing when those levels are off.
 * @param {import('pino').Logger} logger
 * @returns {import('express').RequestHandler}
 */
export function requestLogger(logger) {
  return (req, res, next) => {
    const given = req.headers['x-request-id'];
    const id = typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    res.setHeader('X-Request-Id', id);
    res.locals.requestId = id;
    if (logger.isLevelEnabled('error')) {
      const started = performance.now();
      res.once('finish', () => {
        const level = res.statusCode >= 500 ? 'error' : 'debug';
        if (!logger.isLevelEnabled(level)) return;
        logger[level]({ reqId: id, method: req.method, url: req.originalUrl, status: res.statusCode, ms: Math.round((performance.now() - started) * 10) / 10, error: res.locals.error }, 'request');
      });
    }
    next();
  };
}
