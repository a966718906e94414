import { randomUUID } from 'node:crypto';
import pino from 'pino';

/** How long a written line may wait in the buffer before it reaches stdout. */
export const LOG_FLUSH_MS = 1000;

/**
 * JSON lines on stdout, written asynchronously: stdout is a pipe to the supervisor, and a synchronous write
 * into a full pipe would stop the event loop until the supervisor catches up (seen under overload: a second).
 * Lines are written 4 KB at a time under load, and at the latest LOG_FLUSH_MS after they were logged: a quiet
 * service's warning (S3 failing, Redis gone) reaches the log at once, not when 4 KB have piled up or at exit.
 * runService flushes it on the way out, so the last lines are not lost.
 * @param {string} service @param {string} level
 */
export function createLogger(service, level) {
  return pino(
    { level, base: { service } },
    pino.destination({ dest: 1, sync: false, minLength: 4096, periodicFlush: LOG_FLUSH_MS }),
  );
}

const REQUEST_ID = /^[\w.:-]{1,128}$/;

/** The request id nginx made (X-Request-Id) when it is well formed, else a new one. @param {import('node:http').IncomingMessage} req */
export function requestIdOf(req) {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
}

/**
 * One answered request: an unhandled error is a bug, logged at error; a refusal we chose (503 overloaded,
 * 502 upstream) is counted in the metrics and logged at debug, or a flood of them would flood the log too.
 * @param {import('pino').Logger} logger
 * @param {{ reqId: string, method?: string, url?: string, status: number, started: number, error?: string }} request
 */
export function logRequest(logger, { started, ...request }) {
  const level = request.error || request.status === 500 ? 'error' : 'debug';
  if (logger.isLevelEnabled(level))
    logger[level](
      { ...request, url: redactUrl(request.url), ms: Math.round((performance.now() - started) * 10) / 10 },
      'request',
    );
}

/**
 * A URL as logged: without bearer material (a Hivesigner access token in /hs/<token>, a preview token=), as
 * nginx and haproxy log it. @param {string | undefined} url
 */
export function redactUrl(url) {
  return url?.replace(/\/hs\/[^/?]*/, '/hs/[redacted]').replace(/([?&]token=)[^&]*/g, '$1[redacted]');
}

/**
 * The request id, echoed on the response and kept on the request. nginx's access log is the request log:
 * here each request is logged at debug, and unhandled errors at error, both with the id, so the cost is
 * nothing when those levels are off.
 * @param {import('pino').Logger} logger
 * @returns {import('express').RequestHandler}
 */
export function requestLogger(logger) {
  return (req, res, next) => {
    const id = requestIdOf(req);
    res.setHeader('X-Request-Id', id);
    res.locals.requestId = id;
    if (logger.isLevelEnabled('error')) {
      const started = performance.now();
      res.once('finish', () =>
        logRequest(logger, {
          reqId: id,
          method: req.method,
          url: req.originalUrl,
          status: res.statusCode,
          started,
          error: res.locals.error,
        }),
      );
    }
    next();
  };
}
