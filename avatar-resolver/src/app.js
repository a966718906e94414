import express from 'express';
import { HttpError, errorHandler, healthRoute, requestLogger, requestMetrics } from '@stack/lib';
import { avatarRoute } from './avatar-route.js';
import { DEFAULT_AVATAR_PATH, adminRouter, avatarAnswer, defaultAvatar } from './routes.js';

/**
 * @param {{ config: import('@stack/lib/src/config-types.js').AvatarResolverConfig, logger: import('pino').Logger, registry: import('prom-client').Registry,
 *   resolver: ReturnType<typeof import('./resolver.js').createResolver>, redis: import('ioredis').Redis,
 *   metrics: ReturnType<typeof import('./metrics.js').createResolverMetrics>, version: string,
 *   takedowns: import('@stack/lib/src/takedowns.js').TakedownList, served: import('@stack/lib/src/takedowns.js').ServedLog['served'] }} deps
 */
export function createApp(deps) {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  const metrics = requestMetrics(deps.registry);
  const answer = avatarAnswer(deps);
  app.use(requestLogger(deps.logger));
  app.use(metrics);
  app.get('/healthz', healthRoute({ version: deps.version, ready: async () => true }));
  app.get(DEFAULT_AVATAR_PATH, defaultAvatar);
  app.use('/admin/accounts/:account', adminRouter(deps));
  app.use((req, _res, next) =>
    next(
      new HttpError(
        req.method === 'GET' || req.method === 'HEAD' ? 404 : 405,
        req.method === 'GET' || req.method === 'HEAD' ? 'not_found' : 'method_not_allowed',
      ),
    ),
  );
  app.use(errorHandler(deps.config.CACHE_CONTROL_NEGATIVE));
  const avatars = avatarRoute({ answer, config: deps.config, observe: metrics.observe, logger: deps.logger });
  /** @type {import('node:http').RequestListener} */
  const listener = (req, res) => {
    if (!avatars(req, res)) app(req, res);
  };
  return listener;
}
