/**
 * GET /healthz (and the imagehoster's /.well-known/healthcheck.json and /): 200 when the store is usable.
 * @param {{ version: string, ready: () => Promise<boolean> }} deps
 * @returns {import('express').RequestHandler}
 */
export function healthRoute({ version, ready }) {
  return async (_req, res) => {
    res.locals.route = 'health';
    const ok = await ready();
    res.status(ok ? 200 : 503).set('Cache-Control', 'no-store');
    if (!ok) res.set('Retry-After', '5');
    res.json({ ok, version, date: new Date().toISOString() });
  };
}

/** The paths a health check asks (haproxy, Kubernetes' probes, the imagehoster's own). */
export const HEALTH_PATHS = ['/healthz', '/.well-known/healthcheck.json'];

/**
 * A service's requests while it drains before stopping: health checks answer 404, every other request is
 * served as before. 404 is haproxy's soft stop (`http-check disable-on-404`): no new requests, and those in
 * flight finish here (a server marked down has them ended and sent elsewhere); to Kubernetes' readiness probe
 * and any other balancer it is a failed check like any non-2xx.
 * @param {import('node:http').RequestListener} app @param {() => boolean} draining
 * @returns {import('node:http').RequestListener}
 */
export function drainable(app, draining) {
  return (req, res) => {
    if (!draining() || !HEALTH_PATHS.includes(String(req.url).split('?')[0])) return app(req, res);
    const body = JSON.stringify({ ok: false, draining: true, date: new Date().toISOString() });
    res.writeHead(404, {
      'content-type': 'application/json; charset=utf-8',
      'cache-control': 'no-store',
      'retry-after': '5',
      'content-length': Buffer.byteLength(body),
    });
    res.end(body);
  };
}
