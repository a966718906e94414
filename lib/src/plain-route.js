// The services' hot routes (the origin's /p/, the resolver's /u/) on the plain `http` request, without
// Express's per-request work (routing, the request and response decorations, the query middleware, two
// `finish` listeners: a tenth of a new variant's 2 ms on the event loop). Each such route is answered here
// alone, in every spelling of its URL: one writer of its status, headers, body, JSON error, request id,
// request metric and log line. Express answers the rest.
import { errorAnswer } from './errors.js';
import { logRequest, requestIdOf } from './log.js';

/**
 * @typedef {{ reqId: string, send: (status: number, headers: Record<string, string | number>, body?: Buffer | string) => void,
 *   fail: (err: unknown) => void, done: (status: number, error?: string) => void }} Reply
 *   `send` writes a whole answer (a HEAD's without its body; Content-Length from the body unless given);
 *   `fail` writes an error as every route of the stack does (errorAnswer), or cuts a connection whose answer
 *   had begun; `done` counts and logs an answer written another way (a file streamed)
 * @typedef {{ observe: (route: string, status: number, started: number) => void, logger: import('pino').Logger,
 *   errorCacheControl: string, rejected?: (err: unknown) => void }} ReplyDeps
 *   `rejected`: told of every error answered (a service's count of refusals by reason)
 */

/**
 * The writer of one request's answer. @param {ReplyDeps} deps @param {import('node:http').IncomingMessage} req
 * @param {import('node:http').ServerResponse} res @param {string} route the request metric's route label
 * @returns {Reply}
 */
export function replyTo({ observe, logger, errorCacheControl, rejected }, req, res, route) {
  const started = performance.now();
  const reqId = requestIdOf(req);
  /** @param {number} status @param {string} [error] */
  const done = (status, error) => {
    observe(route, status, started);
    logRequest(logger, { reqId, method: req.method, url: req.url, status, started, error });
  };
  /** @type {Reply['send']} */
  const send = (status, headers, body) => {
    // a 304 carries no length: the one it would name is its 200's
    const length = status === 304 ? {} : { 'Content-Length': body === undefined ? 0 : Buffer.byteLength(body) };
    res.writeHead(status, { ...length, ...headers, 'X-Request-Id': reqId });
    res.end(req.method === 'HEAD' ? undefined : body);
    done(status);
  };
  /** @type {Reply['fail']} */
  const fail = (err) => {
    rejected?.(err);
    if (res.headersSent) {
      res.destroy();
      return done(res.statusCode, String(err));
    }
    const { httpError, headers, unhandled } = errorAnswer(err, errorCacheControl);
    const body = JSON.stringify(httpError);
    const length = Buffer.byteLength(body);
    res.writeHead(httpError.status, {
      ...headers,
      'Content-Type': 'application/json; charset=utf-8',
      'Content-Length': length,
      'X-Request-Id': reqId,
    });
    res.end(req.method === 'HEAD' ? undefined : body);
    done(httpError.status, unhandled);
  };
  return { reqId, send, fail, done };
}

/**
 * A GET or HEAD under `prefix`, split into its path's segments, each percent-decoded, and its query; null
 * for another method or path (a segment count outside `min`..`max`, an empty segment), which Express
 * answers. One trailing slash is allowed, as Express's routes allow it; `slash` says whether there was one.
 * @param {import('node:http').IncomingMessage} req @param {string} prefix e.g. '/p/'
 * @param {number} min @param {number} max
 * @returns {{ segments: string[], search: string, path: string, slash: boolean } | null}
 */
export function plainPath(req, prefix, min, max) {
  if (req.method !== 'GET' && req.method !== 'HEAD') return null;
  const url = req.url || '';
  if (!url.startsWith(prefix)) return null;
  const mark = url.indexOf('?');
  const path = mark < 0 ? url : url.slice(0, mark);
  const slash = path.endsWith('/');
  const parts = path.slice(prefix.length, slash ? -1 : undefined).split('/');
  if (parts.length < min || parts.length > max || parts.includes('')) return null;
  // a malformed percent-escape throws a URIError: a 400 invalid_path, as Express answers it
  const segments = parts.map((part) => decodeURIComponent(part));
  return { segments, search: mark < 0 ? '' : url.slice(mark + 1), path, slash };
}

/**
 * A hot route on the plain request: the listener answers what `route` names (its metric label, from the
 * path's segments; null leaves the request to Express) with `handle`, whose failure is the JSON error.
 * Returns false for what it leaves to Express.
 * @param {ReplyDeps} deps
 * @param {{ prefix: string, min: number, max: number, route: (segments: string[]) => string | null }} shape
 * @param {(asked: NonNullable<ReturnType<typeof plainPath>>, reply: Reply, req: import('node:http').IncomingMessage,
 *   res: import('node:http').ServerResponse) => Promise<void>} handle
 * @returns {(req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse) => boolean}
 */
export function plainRoute(deps, { prefix, min, max, route }, handle) {
  return (req, res) => {
    let asked;
    try {
      asked = plainPath(req, prefix, min, max);
    } catch (err) {
      replyTo(deps, req, res, 'other').fail(err);
      return true;
    }
    const label = asked && route(asked.segments);
    if (!asked || !label) return false;
    const reply = replyTo(deps, req, res, label);
    handle(asked, reply, req, res).catch(reply.fail);
    return true;
  };
}
