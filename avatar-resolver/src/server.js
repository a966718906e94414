import { readFileSync } from 'node:fs';
import {
  AVATAR_INVALIDATE_CHANNEL,
  connectRedis,
  createHiveClient,
  createServedLog,
  createTakedownList,
  redisReady,
  runService,
  subscribe,
} from '@stack/lib';
import { createApp } from './app.js';
import { settings } from './config.js';
import { createResolverMetrics } from './metrics.js';
import { createResolver } from './resolver.js';
import { hiveSource } from './sources/hive.js';
import { httpSource } from './sources/http.js';
import { localSource } from './sources/local.js';

const version = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version;

/** @param {import('@stack/lib/src/config-types.js').AvatarResolverConfig} config @param {import('ioredis').Redis} redis */
function chooseSource(config, redis) {
  if (config.AVATAR_SOURCE === 'hive')
    return hiveSource(createHiveClient({ urls: config.HIVE_API_URLS, timeoutMs: config.AVATAR_UPSTREAM_TIMEOUT_MS }));
  if (config.AVATAR_SOURCE === 'http') {
    return httpSource({
      url: config.AVATAR_HTTP_URL,
      avatarPath: config.AVATAR_HTTP_AVATAR_PATH,
      coverPath: config.AVATAR_HTTP_COVER_PATH,
      timeoutMs: config.AVATAR_UPSTREAM_TIMEOUT_MS,
    });
  }
  return localSource(redis);
}

await runService({
  name: 'avatar-resolver',
  settings,
  async build({ config: loaded, logger, registry }) {
    const config = /** @type {import('@stack/lib/src/config-types.js').AvatarResolverConfig} */ (loaded);
    const metrics = createResolverMetrics(registry);
    const redis = connectRedis(config, logger);
    await redisReady(redis, 2000);
    const resolver = createResolver({ source: chooseSource(config, redis), redis, config, metrics });
    // purges evict the in-process copy at once (the LRU's own TTL is only the safety net)
    const subscriber = subscribe(redis, AVATAR_INVALIDATE_CHANNEL, (account) => resolver.forget(account));
    const takedowns = createTakedownList({
      redis,
      logger,
      service: 'avatar-resolver',
      pollMs: config.TAKEDOWN_POLL_MS,
    });
    await takedowns.ready;
    const { served } = createServedLog({
      redis,
      logger,
      max: config.SERVED_SOURCES_MAX,
      perSource: config.SERVED_PATHS_PER_SOURCE,
    });
    const app = createApp({ config, logger, registry, resolver, redis, metrics, takedowns, served, version });
    return {
      app,
      async close() {
        subscriber.disconnect();
        await takedowns.close();
        redis.disconnect();
      },
    };
  },
});
