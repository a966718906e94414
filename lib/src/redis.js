import { Redis } from 'ioredis';

/**
 * Where Redis is: REDIS_URL's server, or with REDIS_SENTINELS the master the sentinels name (REDIS_URL then
 * gives the database). The user and password: REDIS_USERNAME and REDIS_PASSWORD, else REDIS_URL's; the
 * sentinels ask for the same ones.
 * @param {Record<string, any>} config REDIS_URL, REDIS_USERNAME, REDIS_PASSWORD, REDIS_SENTINELS, REDIS_MASTER_NAME
 * @returns {[string, import('ioredis').RedisOptions]}
 */
export function redisTarget(config) {
  const url = new URL(config.REDIS_URL);
  const password = config.REDIS_PASSWORD || decodeURIComponent(url.password) || undefined;
  const username = config.REDIS_USERNAME || decodeURIComponent(url.username) || undefined;
  if (!config.REDIS_SENTINELS?.length) {
    // the user and password as options: ioredis would let those in the URL win over them
    url.password = '';
    url.username = '';
    return [url.href, { ...(password ? { password } : {}), ...(username ? { username } : {}) }];
  }
  const sentinels = config.REDIS_SENTINELS.map((address) => {
    const at = address.lastIndexOf(':');
    return { host: address.slice(0, at).replace(/^\[|\]$/g, ''), port: Number(address.slice(at + 1)) };
  });
  return [
    '',
    {
      sentinels,
      name: config.REDIS_MASTER_NAME || 'mymaster',
      db: Number(url.pathname.slice(1) || 0),
      password,
      username,
      // the sentinels know the services' users too (infra/secrets.js)
      sentinelPassword: password,
      sentinelUsername: username,
      // a failover: the master now answers READONLY until the client asks the sentinels again
      reconnectOnError: (err) => err.message.startsWith('READONLY'),
    },
  ];
}

const TIMED_OUT = 'Command timed out'; // ioredis' message when commandTimeout passes

/**
 * A client that drops its connection when a command times out and connects again. A Redis that stops
 * answering without closing its connections (stopped, or cut off by a network that drops packets) would
 * otherwise cost every later command its whole timeout, for as long as the stall lasts; and after a Sentinel
 * failover away from it, the client would keep talking to the old master. While it connects again, commands
 * fail at once (no offline queue) and callers degrade as with Redis down; a new connection asks the sentinels
 * where the master is now. Its duplicates (blocking readers, subscribers) behave the same.
 */
export class StallAwareRedis extends Redis {
  /** @param {import('ioredis').Command} command @param {import('ioredis/built/types.js').WriteableStream} [stream] */
  sendCommand(command, stream) {
    const sent = super.sendCommand(command, stream);
    command.promise.catch((/** @type {Error} */ err) => {
      if (err?.message !== TIMED_OUT || this.status !== 'ready') return;
      this.emit('stalled', command.name);
      this.disconnect(true);
    });
    return sent;
  }

  /** @param {Partial<import('ioredis').RedisOptions>} [override] @returns {any} */
  duplicate(override) {
    return new StallAwareRedis(/** @type {any} */ ({ ...this.options, ...override }));
  }
}

/**
 * A Redis client that fails fast while Redis is down (no offline queue) or stalled (a command's timeout, then
 * a new connection), so callers can degrade instead of hanging; it reconnects by itself, to the new master
 * after a Sentinel failover.
 * @param {Record<string, any>} config REDIS_URL, REDIS_SENTINELS, REDIS_MASTER_NAME
 * @param {import('pino').Logger} logger
 */
export function connectRedis(config, logger) {
  const [url, target] = redisTarget(config);
  const options = {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2000,
    // Redis that stops answering without going away (stopped, a network dropping packets: the connection looks
    // alive for minutes) fails a command as Redis down does, so its caller degrades instead of hanging; past
    // the longest wait a command asks for (blocking stream reads: 1 s; WAIT: REDIS_ACK_TIMEOUT_MS)
    commandTimeout: Math.max(2000, (config.REDIS_ACK_TIMEOUT_MS || 1000) + 1000),
    retryStrategy: (/** @type {number} */ times) => Math.min(times * 100, 2000),
    ...target,
  };
  // (typed as the constructor's overloads take it: ioredis' own options type allows a reply mapping they refuse)
  const typed = /** @type {any} */ (options);
  const redis = url ? new StallAwareRedis(url, typed) : new StallAwareRedis(typed);
  redis.on('stalled', (command) => logger.warn({ command }, 'redis stopped answering: connecting again'));
  let lastError = '';
  redis.on('error', (err) => {
    if (err.message !== lastError) logger.warn({ err: err.message }, 'redis error');
    lastError = err.message;
  });
  redis.on('ready', () => {
    lastError = '';
    logger.info('redis ready');
  });
  return redis;
}

/** Resolves once the client is ready, or after `ms` (services start even when Redis is late). @param {Redis} redis @param {number} ms */
export function redisReady(redis, ms) {
  if (redis.status === 'ready') return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    redis.once('ready', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

/**
 * Waits until `replicas` replicas hold every write this client made (WAIT), so what is acknowledged next
 * survives a failover to one of them; throws when fewer confirm within `timeoutMs`. No-op at 0.
 * @param {Redis} redis @param {{ REDIS_ACK_REPLICAS?: number, REDIS_ACK_TIMEOUT_MS?: number }} config
 */
export async function awaitReplicas(redis, config) {
  const replicas = config.REDIS_ACK_REPLICAS || 0;
  if (!replicas) return;
  const held = Number(await redis.wait(replicas, config.REDIS_ACK_TIMEOUT_MS || 1000));
  if (held < replicas) throw new Error(`held by ${held} of ${replicas} replicas`);
}

/**
 * Listens on a pub/sub channel on a connection of its own, which resubscribes after every reconnect and is
 * pinged every `pingMs`: a subscriber waits for messages and sends nothing, so without the ping it would never
 * notice a Redis that stalled (or a failover away from it) and would miss every message from then on.
 * @param {Redis} redis the client to duplicate
 * @param {string} channel
 * @param {(message: string) => void} onMessage
 * @param {number} [pingMs]
 * @returns {{ disconnect(): void }}
 */
export function subscribe(redis, channel, onMessage, pingMs = 5000) {
  const subscriber = redis.duplicate({ enableOfflineQueue: true });
  subscriber.on('error', () => {});
  subscriber.on('message', (/** @type {string} */ _channel, /** @type {string} */ message) => onMessage(message));
  subscriber.subscribe(channel).catch(() => {});
  const pinging = setInterval(() => subscriber.ping().catch(() => {}), pingMs);
  pinging.unref();
  return {
    disconnect() {
      clearInterval(pinging);
      subscriber.disconnect();
    },
  };
}
