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
