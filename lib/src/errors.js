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
 * Turns anything thrown into an HttpError; unknown errors become a 500 with no detail leaked.
 * @param {unknown} err
 * @returns {HttpError}
 */
export function toHttpError(err) {
  if (err instanceof HttpError) return err;
  const anyErr = /** @type {any} */ (err);
  if (anyErr && anyErr.type === 'entity.too.large') return new HttpError(413, 'payload_too_large', { limit: anyErr.limit });
  if (anyErr && anyErr.type === 'entity.parse.failed') return new HttpError(400, 'invalid_json');
  // express marks what the client got wrong, e.g. a path segment that is not valid percent-encoding
  if (err instanceof URIError) return new HttpError(400, 'invalid_path', { reason: 'malformed percent-encoding' });
  if (anyErr && Number.isInteger(anyErr.status) && anyErr.status >= 400 && anyErr.status < 500) return new HttpError(anyErr.status, 'bad_request');
  return new HttpError(500, 'internal_error');
}

/**
 * Express error middleware: JSON body, `no-store` on 5xx (never cache a failure).
 * @param {string} [errorCacheControl] Cache-Control for 4xx answers
 * @returns {import('express').ErrorRequestHandler}
 */
export function errorHandler(errorCacheControl = 'no-store') {
  return (err, req, res, _next) => {
    const httpError = toHttpError(err);
    // logged with the request (requestLogger) as an error line carrying the request id
    if (httpError.status >= 500 && !(err instanceof HttpError)) res.locals.error = String(/** @type {any} */ (err)?.stack || err);
    if (res.headersSent) {
      res.destroy();
      return;
    }
    res.status(httpError.status);
    res.set(httpError.headers);
    res.set('Cache-Control', httpError.status >= 500 || httpError.status === 429 ? 'no-store' : errorCacheControl);
    res.removeHeader('ETag');
    res.json(httpError);
  };
}
