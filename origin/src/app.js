import express from 'express';
import { HEALTH_PATHS, HttpError, errorHandler, healthRoute, requestLogger, requestMetrics } from '@stack/lib';
import { legacyRoute } from './routes/legacy.js';
import { proxyAuthRoute } from './routes/proxy-auth.js';
import { proxyHandler } from './routes/proxy.js';
import { serveRoute } from './routes/serve.js';
import { passedPrechecks } from './uploads/checks.js';
import { hiveUploadRoute, hivesignerUploadRoute, tokenUploadRoute, uploadCheckRoute } from './routes/upload.js';

/**
 * The origin's HTTP surface (images.hive.blog compatible).
 * @param {{ config: import('@stack/lib/src/config-types.js').OriginConfig, logger: import('pino').Logger, registry: import('prom-client').Registry,
 *   images: ReturnType<typeof import('./images.js').createImages>, store: import('./store/index.js').Store,
 *   checks: import('./queue.js').TransformQueue,
 *   metrics: import('./metrics.js').OriginMetrics, redis: import('ioredis').Redis,
 *   verifySignature: import('./uploads/hive-auth.js').VerifySignature, verifyHivesigner: ((token: string) => Promise<string>) | null,
 *   guard: import('./takedown.js').Guard, whitelist: import('./whitelist.js').Whitelist,
 *   version: string }} deps
 */
export function createApp(deps) {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');
  const metrics = requestMetrics(deps.registry);
  app.use(requestLogger(deps.logger));
  app.use(metrics);

  const health = healthRoute({ version: deps.version, ready: async () => true });
  app.get([...HEALTH_PATHS, '/'], health);
  // a Hive upload's precheck passed in nginx's check is not run again by its route: remembered for twice
  // nginx's default time to read a body (NGINX_UPLOAD_DEADLINE_S, 300 s); a slower body is checked again
  const uploads = { ...deps, prechecked: passedPrechecks(600_000) };
  app.get('/.upload-check/*rest', uploadCheckRoute(uploads));
  // /<W>x<H>/<url>: a regular expression (Express 5 paths hold none): the size is the first group
  app.get(/^\/([0-9]{1,5}x[0-9]{1,5})\/.+/, legacyRoute(deps));
  app.post('/upload', tokenUploadRoute(deps));
  app.post('/proxy-auth/:account/:signature', proxyAuthRoute(deps));
  app.post('/cs/:account/:signature', hiveUploadRoute(uploads, 'checksum'));
  app.post('/hs/:token', hivesignerUploadRoute(deps));
  app.post('/:account/:signature', hiveUploadRoute(uploads));
  app.get('/:key{/:filename}', serveRoute(deps));

  app.use((req, _res, next) => {
    const known = ['GET', 'HEAD', 'POST'].includes(req.method);
    next(
      known
        ? new HttpError(404, 'not_found')
        : new HttpError(405, 'method_not_allowed', { method: req.method }, { Allow: 'GET, HEAD, POST' }),
    );
  });
  app.use(errorHandler(deps.config.CACHE_CONTROL_NEGATIVE));
  const proxy = proxyHandler({ ...deps, observe: metrics.observe });
  /** @type {import('node:http').RequestListener} */
  const listener = (req, res) => {
    if (!proxy(req, res)) app(req, res);
  };
  return listener;
}
