// Redis's part of the render: the values of redis.conf.template and the exporter's program, and the
// sentinel's own config file.
import fs from 'node:fs';
import path from 'node:path';
import { reachable } from '../resolve.js';
import { ownsRedis, redisAclLines, sentinelAclLines } from '../secrets.js';

/**
 * redis.conf's and the exporter's values. @param {Record<string, any>} config @returns {Record<string, string>}
 */
export function redisValues(config) {
  return {
    REDIS_BIND: config.LISTEN_ADDRESS,
    // loopback only: protected mode; on a network (compose's, a pod's, a fleet's private one) that network
    // and its firewall are the protection, and the replicas and sentinels of other machines must get in
    REDIS_PROTECTED_MODE: /^(127\.|::1$)/.test(config.LISTEN_ADDRESS) ? 'yes' : 'no',
    REDIS_REPLICATION: redisReplication(config),
    // requirepass for clients, masterauth for a replica (any node may become one after a failover)
    REDIS_AUTH: config.REDIS_PASSWORD
      ? `requirepass ${redisString(config.REDIS_PASSWORD)}\nmasterauth ${redisString(config.REDIS_PASSWORD)}\n${redisAclLines(config)}`
      : "# no password (REDIS_PASSWORD): not this stack's Redis",
    // the exporter's address without a password (supervisord.conf is readable by all); its user's password
    // comes from a map of address to password (infra/secrets.js)
    REDIS_EXPORTER_ADDR: redisAddress(config.REDIS_URL),
    REDIS_EXPORTER_USER: config.REDIS_PASSWORD && ownsRedis(config) ? 'exporter' : config.REDIS_USERNAME || 'default',
  };
}

/** A redis.conf string argument, quoted. @param {string} value */
const redisString = (value) => JSON.stringify(value);

/**
 * The sentinel's config, written once into its data directory (Sentinel rewrites it with what it learns:
 * the current master, the other sentinels, the replicas) and kept across starts. It announces this
 * machine's address, since several may share one host's loopback.
 * @param {Record<string, any>} config @param {string} dir
 */
export function writeSentinelConfig(config, dir) {
  const file = path.join(dir, 'sentinel.conf');
  if (!config.STACK_PROGRAMS.includes('redis-sentinel') || fs.existsSync(file)) return;
  const [host, port] = (
    config.REDIS_SENTINEL_MONITOR ||
    config.REDIS_REPLICA_OF ||
    `${reachable(config.LISTEN_ADDRESS)}:${config.REDIS_PORT}`
  ).split(':');
  const name = config.REDIS_MASTER_NAME;
  fs.writeFileSync(
    file,
    [
      '# Redis Sentinel, written once by infra/render.js; Sentinel keeps what it learns here (delete it to start over)',
      `bind ${config.LISTEN_ADDRESS}`,
      `port ${config.REDIS_SENTINEL_PORT}`,
      'protected-mode no',
      `dir ${dir}`,
      'daemonize no',
      ...(config.LISTEN_ADDRESS === '0.0.0.0' ? [] : [`sentinel announce-ip ${config.LISTEN_ADDRESS}`]),
      `sentinel monitor ${name} ${host} ${port} ${config.REDIS_SENTINEL_QUORUM}`,
      // the master's and replicas' password, and the sentinel's own (it can be told to fail over)
      ...(config.REDIS_PASSWORD
        ? [
            `sentinel auth-pass ${name} ${redisString(config.REDIS_PASSWORD)}`,
            `requirepass ${redisString(config.REDIS_PASSWORD)}`,
          ]
        : []),
      // the services' users: they ask where the master is (infra/secrets.js)
      ...sentinelAclLines(config),
      // a sentinel whose failover attempt failed (its election lost or split, no replica good enough yet) tries
      // again after twice the failover timeout: 20 s here, not the 60 s a 30 s timeout gave (a CI run waited 60 s
      // for a promotion that never came)
      `sentinel down-after-milliseconds ${name} 3000`,
      `sentinel failover-timeout ${name} 10000`,
      `sentinel parallel-syncs ${name} 1`,
      '',
    ].join('\n'),
    { mode: 0o600 },
  );
}

/** A Redis URL without its user and password. @param {string} url */
function redisAddress(url) {
  const parsed = new URL(url);
  parsed.username = '';
  parsed.password = '';
  return parsed.href;
}

/**
 * redis.conf's replication lines: a replica of REDIS_REPLICA_OF, and the address it is known by (several
 * machines may share one host's loopback, where the master would otherwise see 127.0.0.1).
 * @param {Record<string, any>} config
 */
function redisReplication(config) {
  const lines = [];
  if (config.LISTEN_ADDRESS !== '0.0.0.0') lines.push(`replica-announce-ip ${config.LISTEN_ADDRESS}`);
  lines.push(
    config.REDIS_REPLICA_OF
      ? `replicaof ${config.REDIS_REPLICA_OF.replace(':', ' ')}`
      : '# a master (REDIS_REPLICA_OF is empty); the sentinels may make it a replica after a failover',
  );
  return lines.join('\n');
}
