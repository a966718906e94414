import { errorAnswer, logRequest, requestIdOf } from '@stack/lib';

// The canonical avatar URLs, exactly as frontends write them; any other form (a trailing slash, capitals,
// percent-escapes, a bad size) goes through Express, which answers it or refuses it in the usual way.
const CANONICAL = /^\/u\/([a-z0-9.-]{3,16})\/(avatar|cover)(?:\/(small|medium|large))?(?:\?.*)?$/;

/**
 * Avatar redirects are the resolver's hot path, thousands a second on a cache miss wave: answered on the
 * plain `http` request, without Express's per-request work, and with the same answer in every respect
 * (headers, JSON errors, X-Request-Id, request metrics and log line). Returns false for what it leaves
 * to Express.
 * @param {{ answer: ReturnType<typeof import('./routes.js').avatarAnswer>, observe: (route: string, status: number, started: number) => void,
 *   logger: import('pino').Logger, errorCacheControl: string }} deps
 * @returns {(req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse) => boolean}
 */
export function avatarFastPath({ answer, observe, logger, errorCacheControl }) {
  return (req, res) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') return false;
    const match = CANONICAL.exec(req.url || '');
    if (!match) return false;
    const started = performance.now();
    const [, account, kind, size] = match;
    const reqId = requestIdOf(req);
    /** @param {number} status @param {Record<string, string>} headers @param {string} [body] @param {string} [error] */
    const send = (status, headers, body = '', error = undefined) => {
      res.writeHead(status, { ...headers, 'X-Request-Id': reqId, 'Content-Length': Buffer.byteLength(body) });
      res.end(body);
      observe(kind, status, started);
      logRequest(logger, { reqId, method: req.method, url: req.url, status, started, error });
    };
    answer(account, kind, size).then(
      (headers) => send(302, headers),
      (err) => {
        const { httpError, headers, unhandled } = errorAnswer(err, errorCacheControl);
        const body = JSON.stringify(httpError);
        send(httpError.status, { ...headers, 'Content-Type': 'application/json; charset=utf-8' }, body, unhandled);
      },
    );
    return true;
  };
}
