import { readFileSync } from 'node:fs';
import express from 'express';
import {
  HttpError,
  connectRedis,
  createHiveClient,
  errorHandler,
  healthRoute,
  StartupError,
  redisReady,
  requestLogger,
  requestMetrics,
  runService,
} from '@stack/lib';
import { settings } from './config.js';
import { adminAuth, deadLetterRouter } from './dead-letters.js';
import { createFollower } from './hive-follow.js';
import { createWarmer } from './warm/warmer.js';
import { createPurgeMetrics } from './metrics.js';
import { takedownRouter } from './takedown-admin.js';
import { createListSync } from './takedown-sources.js';
import { createTakedownStore } from './takedowns.js';
import { createCloudflareTarget } from './targets/cloudflare.js';
import { createVarnishTarget } from './targets/varnish.js';
import { createNodeQueue } from './node-queue.js';
import { webhookRouter } from './webhook.js';
import { createWorker } from './worker.js';

const version = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version;

await runService({
  name: 'purge-service',
  settings,
  async build({ config: loaded, logger, registry }) {
    const config = /** @type {import('@stack/lib/src/config-types.js').PurgeServiceConfig} */ (loaded);
    // the chain's whitelist is what the follower records: without it every remote image would be refused
    if (config.PROXY_WHITELIST === 'chain' && !config.HIVE_FOLLOW)
      throw new StartupError('PROXY_WHITELIST=chain needs HIVE_FOLLOW=true: the chain follower records the whitelist');
    const redis = connectRedis(config, logger);
    await redisReady(redis, 2000);
    const metrics = createPurgeMetrics(registry, {
      redis,
      stream: config.PURGE_STREAM,
      group: config.PURGE_GROUP,
      deadStream: config.PURGE_DEAD_STREAM,
    });
    const varnish = createVarnishTarget({
      nodes: config.PURGE_VARNISH_NODES,
      soft: config.PURGE_XKEY_SOFT,
      timeoutMs: config.PURGE_TIMEOUT_MS,
    });
    varnish.warm().then(
      (refused) => {
        if (refused.length)
          logger.warn(
            { nodes: refused },
            'varnish nodes not purgeable at start: away, or this address is not among their VARNISH_PURGERS; their purges wait in their queues',
          );
      },
      (err) => logger.warn({ err }, 'varnish nodes not resolved at start'),
    );
    const cdn =
      config.CLOUDFLARE_ZONE_ID && config.CLOUDFLARE_API_TOKEN
        ? createCloudflareTarget({
            base: config.CLOUDFLARE_API_BASE,
            zone: config.CLOUDFLARE_ZONE_ID,
            token: config.CLOUDFLARE_API_TOKEN,
            perCall: config.CLOUDFLARE_URLS_PER_CALL,
            callsPerSecond: config.CLOUDFLARE_CALLS_PER_SECOND,
            burst: config.CLOUDFLARE_BURST,
            timeoutMs: config.PURGE_TIMEOUT_MS,
          })
        : null;
    const nodes = createNodeQueue({ redis, varnish, config, logger, metrics });
    nodes.start();
    const worker = createWorker({ redis, config, logger, varnish, nodes, cdn, metrics });
    worker.start();
    const follower = config.HIVE_FOLLOW
      ? createFollower({
          hive: createHiveClient({ urls: config.HIVE_API_URLS, timeoutMs: config.HIVE_API_TIMEOUT_MS }),
          redis,
          config,
          logger,
          metrics,
        })
      : null;
    follower?.start();
    const warmer = config.HIVE_FOLLOW && config.WARM ? createWarmer({ redis, config, logger, metrics }) : null;
    warmer?.start();
    const store = createTakedownStore({ redis, config });
    const lists = createListSync({ store, config, logger });
    lists.start();

    const app = express();
    app.disable('x-powered-by');
    app.use(requestLogger(logger));
    app.use(requestMetrics(registry));
    // healthy = can accept a webhook, which needs Redis
    app.get('/healthz', healthRoute({ version, ready: async () => redis.status === 'ready' }));
    app.use(webhookRouter({ redis, config, metrics }));
    app.use('/admin', adminAuth(config));
    app.use(deadLetterRouter(redis, config));
    app.use(takedownRouter({ store, config, metrics }));
    app.use((_req, _res, next) => next(new HttpError(404, 'not_found')));
    app.use(errorHandler('no-store'));
    return {
      app,
      async close() {
        lists.stop();
        await follower?.stop();
        await warmer?.stop();
        await worker.stop();
        await nodes.stop();
        await varnish.close();
        redis.disconnect();
      },
    };
  },
});
