// One error class and one JSON body shape for every service: {"error":{"name","info"}} (the Hive imagehoster's).

export class HttpError extends Error {
  /**
   * @param {number} status HTTP status
   * @param {string} name snake_case error name clients can switch on
   * @param {Record<string, unknown>} [info] details safe to show the client
   * @param {Record<string, string>} [headers] extra response headers (e.g. Retry-After)
   */
  constructor(status, name, info = {}, headers = {}) {
    super(name);
    this.status = status;
    this.name = name;
    this.info = info;
    this.headers = headers;
  }

  toJSON() {
    return { error: { name: this.name, info: this.info } };
  }
}

/**
 * The disk full (ENOSPC) or the user's disk quota spent (EDQUOT): a 507 for the operator to answer, never the
 * request's or the image's fault (not remembered as a source's failure); null for any other error.
 * @param {unknown} err
 */
export function storageFull(err) {
  const code = /** @type {any} */ (err)?.code;
  if (code !== 'ENOSPC' && code !== 'EDQUOT') return null;
  return new HttpError(507, 'insufficient_storage', {}, { 'Retry-After': '60' });
}

/**
 * Turns anything thrown into an HttpError; unknown errors become a 500 with no detail leaked.
 * @param {unknown} err
 * @returns {HttpError}
 */
export function toHttpError(err) {
  if (err instanceof HttpError) return err;
  const anyErr = /** @type {any} */ (err);
  if (anyErr && anyErr.type === 'entity.too.large')
    return new HttpError(413, 'payload_too_large', { limit: anyErr.limit });
  if (anyErr && anyErr.type === 'entity.parse.failed') return new HttpError(400, 'invalid_json');
  // express marks what the client got wrong, e.g. a path segment that is not valid percent-encoding
  if (err instanceof URIError) return new HttpError(400, 'invalid_path', { reason: 'malformed percent-encoding' });
  const full = storageFull(err);
  if (full) return full;
  // a range past a file's end: `send` (Express's too) gives the Content-Range that says the length with it
  if (anyErr?.status === 416) {
    const range = anyErr.headers?.['Content-Range'];
    return new HttpError(416, 'range_not_satisfiable', {}, range ? { 'Content-Range': String(range) } : {});
  }
  if (anyErr && Number.isInteger(anyErr.status) && anyErr.status >= 400 && anyErr.status < 500)
    return new HttpError(anyErr.status, 'bad_request');
  return new HttpError(500, 'internal_error');
}

/**
 * Status, headers and JSON body of the answer to anything thrown: `no-store` on 5xx and 429 (never cache a
 * failure), `errorCacheControl` on other 4xx. `unhandled` holds the stack of an error that is a bug.
 * @param {unknown} err @param {string} [errorCacheControl]
 */
export function errorAnswer(err, errorCacheControl = 'no-store') {
  const httpError = toHttpError(err);
  // a 4xx may name its own lifetime (a takedown's 451 is short so that an unblock shows)
  const cacheControl =
    httpError.status >= 500 || httpError.status === 429
      ? 'no-store'
      : httpError.headers['Cache-Control'] || errorCacheControl;
  const unhandled =
    httpError.status >= 500 && !(err instanceof HttpError) ? String(/** @type {any} */ (err)?.stack || err) : undefined;
  return { httpError, headers: { ...httpError.headers, 'Cache-Control': cacheControl }, unhandled };
}

// the body of a request refused before it was read, read to its end and dropped (the connection kept) up to this
const DRAIN_BYTES = 64 * 2 ** 20;
// what a refused request's client may still send after the answer, read and dropped before its connection closes
const LINGER_BYTES = 256 * 1024;
const LINGER_MS = 2000;

/**
 * Closes a connection whose answer went out before the request's body was read (a 411, 413 or a full quota)
 * without cutting the client off mid-send: Node closes such a socket once the answer is written, and a
 * client still writing its body then gets EPIPE instead of the answer. Here our side ends (FIN) after the
 * answer, and what the client still sends is read and dropped until its body is in, up to 256 KB or 2 s,
 * then the socket closes (nginx's lingering close). @param {import('node:http').IncomingMessage} req
 */
export function lingeringClose(req) {
  const { socket } = req;
  if (req.complete || !socket || socket.destroyed) return;
  let read = 0;
  const stop = () => socket.destroy();
  const timer = setTimeout(stop, LINGER_MS);
  timer.unref();
  socket.on('data', (chunk) => {
    read += chunk.length;
    if (read > LINGER_BYTES) stop();
  });
  socket.once('close', () => clearTimeout(timer));
  // what Node's server calls once a `Connection: close` answer is written
  /** @type {any} */ (socket).destroySoon = () => {
    if (socket.writable) socket.end();
    if (req.complete) stop();
    else req.once('end', stop);
  };
}

/**
 * Express error middleware: the JSON body of errorAnswer.
 * @param {string} [errorCacheControl] Cache-Control for 4xx answers
 * @returns {import('express').ErrorRequestHandler}
 */
export function errorHandler(errorCacheControl = 'no-store') {
  return (err, req, res, _next) => {
    const { httpError, headers, unhandled } = errorAnswer(err, errorCacheControl);
    // logged with the request (requestLogger) as an error line carrying the request id
    if (unhandled) res.locals.error = unhandled;
    if (res.headersSent) {
      res.destroy();
      return;
    }
    res.status(httpError.status);
    res.set(headers);
    // the route's own (an image's type and tag, set before sending its file failed): the answer is JSON
    res.removeHeader('ETag');
    res.removeHeader('Content-Type');
    // answered before the request's body was read to the end (a refused token, a form the parser gave up on):
    // left unread, it stalled the connection, and the next request on it (haproxy reuses them) waited for its
    // timeout. The rest of a body of a sane length is read and dropped, the connection kept (closed after the
    // first 256 KB, haproxy got a reset instead of the answer); one of no or a huge length is closed after
    // what the client still sends, as a length refused (411, 413) is
    const closing = String(res.getHeader('connection')).toLowerCase() === 'close';
    if (!req.complete && !closing && Number(req.headers['content-length']) <= DRAIN_BYTES) {
      req.unpipe();
      req.resume();
    } else if (!req.complete || closing) {
      res.set('Connection', 'close');
      lingeringClose(req);
    }
    res.json(httpError);
  };
}

/**
 * What a service cannot work with, found while it starts (a wrong S3 key, a missing bucket, a bad size list,
 * system codecs that do not load): runService logs one line and exits 1 instead of a stack trace.
 */
export class StartupError extends Error {
  /** @param {string} message @param {{ cause?: unknown }} [options] */
  constructor(message, options = {}) {
    super(message, options);
    this.name = 'StartupError';
  }
}

/**
 * A file that was there is gone (a cached original or variant deleted by hand, a cache segment closed or
 * rewritten under a reader): not the image's fault; the caller makes it again, once.
 */
export class GoneError extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = 'GoneError';
  }
}

/** A GoneError, or the filesystem's own "no such file". @param {unknown} err */
export const isGone = (err) => err instanceof GoneError || /** @type {any} */ (err)?.code === 'ENOENT';
