import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { pinoHttp } from 'pino-http';

/** @param {string} service @param {string} level */
export function createLogger(service, level) {
  return pino({ level, base: { service } });
}

const REQUEST_ID = /^[\w.:-]{1,128}$/;

/**
 * Request logging with the request id nginx made (X-Request-Id), or a new one; echoed on the response.
 * @param {import('pino').Logger} logger
 */
export function requestLogger(logger) {
  return pinoHttp({
    logger,
    genReqId(req, res) {
      const given = req.headers['x-request-id'];
      const id = typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
      res.setHeader('X-Request-Id', id);
      return id;
    },
    customLogLevel(_req, res, err) {
      if (err || res.statusCode >= 500) return 'error';
      return 'info';
    },
    serializers: {
      req: (req) => ({ method: req.method, url: req.url }),
      res: (res) => ({ status: res.statusCode }),
    },
  });
}
