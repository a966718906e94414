// The stack's secrets: generated once into STACK_DIR/secrets when not given, and handed to each program
// apart, so that a program holds its own secrets only (a libvips exploit in the origin yields the upload
// tokens and the origin's Redis user, not the webhook keys, the admin tokens or Redis' own password).
//   STACK_DIR/secrets/all.env        every secret (root's: the launcher and the operator's tools)
//   STACK_DIR/secrets/<program>.env  one program's, and the settings it declares, which a restart by
//                                    `reload` reads (its user's alone; the directory lets it in by name only)
// Each service reaches the stack's Redis as its own ACL user, whose password is derived from Redis' one, so
// every machine of a fleet knows it without another shared secret; the exporter's user reads INFO only.
import { createHash, createHmac, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { makeDir } from './dirs.js';

/** What each program receives besides the settings everyone has: its secrets, and its Redis user. */
/** @type {Record<string, { settings: string[], redisUser: string, role: string }>} */
export const PROGRAM_SECRETS = {
  origin: {
    settings: ['UPLOAD_TOKENS', 'S3_ACCESS_KEY_ID', 'S3_SECRET_ACCESS_KEY', 'METRICS_PASSWORD'],
    redisUser: 'origin',
    role: 'origin',
  },
  'avatar-resolver': {
    settings: ['AVATAR_ADMIN_TOKEN', 'METRICS_PASSWORD'],
    redisUser: 'resolver',
    role: 'resolver',
  },
  'purge-service': {
    settings: ['PURGE_HMAC_KEYS', 'PURGE_ADMIN_TOKEN', 'CLOUDFLARE_API_TOKEN', 'METRICS_PASSWORD'],
    redisUser: 'purge',
    role: 'purge',
  },
};

/** The Redis ACL users of the services (`+@all -@dangerous`: no CONFIG, MODULE, ACL, DEBUG, FLUSHALL, KEYS…). */
const SERVICE_ACL = '~* &* +@all -@dangerous +info +role';
// the exporter: what redis_exporter sends (INFO, SLOWLOG, LATENCY, CLIENT SETNAME), and no key, no
// CONFIG GET (it would read Redis' own password back)
const EXPORTER_ACL =
  'resetkeys resetchannels -@all +ping +info +client|setname +latency|latest +slowlog|len +slowlog|get +select';
// a service asks the sentinels where the master is, nothing else
const SENTINEL_CLIENT_ACL =
  '-@all +@connection +sentinel|get-master-addr-by-name +sentinel|sentinels +sentinel|master +role';

/**
 * A secret generated once and kept in STACK_DIR/secrets (0600, root's: the directory, 0711, lets the
 * programs open their own file by name and list nothing).
 * @param {Record<string, any>} config @param {string} name @param {() => string} make
 */
export function keptSecret(config, name, make) {
  const file = path.join(config.STACK_DIR, 'secrets', name);
  if (!fs.existsSync(file)) {
    makeDir(path.dirname(file), 0o711);
    fs.writeFileSync(file, make(), { mode: 0o600 });
  }
  return fs.readFileSync(file, 'utf8').trim();
}

/**
 * Redis' password (the default user's: Redis itself, replicas, sentinels, the operator): REDIS_PASSWORD, else
 * REDIS_URL's, else, when this stack runs Redis or a sentinel, generated once and kept in STACK_DIR/secrets
 * (any local user reaches a loopback port). Someone else's Redis without one is used without one.
 * @param {Record<string, any>} config
 */
export function redisPassword(config) {
  const given = config.REDIS_PASSWORD || decodeURIComponent(new URL(config.REDIS_URL).password);
  if (given || !ownsRedis(config)) return given;
  return keptSecret(config, 'redis-password', () => randomBytes(18).toString('base64url'));
}

/** Whether this stack runs the Redis its services use (its own, or a fleet's sentinels and replicas). @param {Record<string, any>} config */
export const ownsRedis = (config) =>
  ['redis', 'redis-sentinel'].some((program) => config.STACK_PROGRAMS.includes(program));

/** The stats password: from the environment, else generated once and kept in STACK_DIR/secrets. @param {Record<string, any>} config */
export function statsPassword(config) {
  return (
    config.HAPROXY_STATS_PASSWORD ||
    keptSecret(config, 'haproxy-stats-password', () => randomBytes(18).toString('base64url'))
  );
}

/**
 * The metrics password (the services' metrics ports and Prometheus, user `metrics`): from the environment,
 * else generated once and kept in STACK_DIR/secrets. @param {Record<string, any>} config
 */
export function metricsPassword(config) {
  return config.METRICS_PASSWORD || keptSecret(config, 'metrics-password', () => randomBytes(18).toString('base64url'));
}

/** The embedded S3 server's credentials, when not given: generated once into STACK_DIR/secrets. @param {Record<string, any>} config */
export function embeddedS3Credentials(config) {
  if (!config.S3_EMBEDDED) return;
  if (!config.S3_ACCESS_KEY_ID)
    config.S3_ACCESS_KEY_ID = keptSecret(config, 's3-access-key-id', () => `stack${randomBytes(8).toString('hex')}`);
  if (!config.S3_SECRET_ACCESS_KEY)
    config.S3_SECRET_ACCESS_KEY = keptSecret(config, 's3-secret-access-key', () =>
      randomBytes(24).toString('base64url'),
    );
}

/** An ACL user's password, derived from Redis' own. @param {string} admin @param {string} user */
export const redisUserPassword = (admin, user) =>
  createHmac('sha256', admin).update(`image-cdn-stack redis user ${user}`).digest('base64url');

/**
 * The password of this Redis' ACL user `user`: REDIS_ACL_PASSWORDS' (the chart hands them out from a Secret
 * of their own), else derived from Redis' own. @param {Record<string, any>} config @param {string} user
 */
export function aclPassword(config, user) {
  const given = (config.REDIS_ACL_PASSWORDS || []).find((/** @type {string} */ entry) => entry.startsWith(`${user}=`));
  return given ? given.slice(user.length + 1) : redisUserPassword(config.REDIS_PASSWORD, user);
}

/** `#<sha256>`: a password as an ACL rule, without the password itself. @param {string} password */
const aclHash = (password) => `#${createHash('sha256').update(password).digest('hex')}`;

/** The users every Redis of this stack knows (its redis.conf): one per service and the exporter's. @param {Record<string, any>} config */
export function redisAclLines(config) {
  if (!config.REDIS_PASSWORD || !ownsRedis(config)) return "# no ACL users: not this stack's Redis";
  const services = Object.values(PROGRAM_SECRETS).map(
    ({ redisUser }) => `user ${redisUser} on ${aclHash(aclPassword(config, redisUser))} ${SERVICE_ACL}`,
  );
  return [...services, `user exporter on ${aclHash(aclPassword(config, 'exporter'))} ${EXPORTER_ACL}`].join('\n');
}

/** The sentinels' users for the services (ask where the master is). @param {Record<string, any>} config */
export function sentinelAclLines(config) {
  if (!config.REDIS_PASSWORD) return [];
  return Object.values(PROGRAM_SECRETS).map(
    ({ redisUser }) => `user ${redisUser} on ${aclHash(aclPassword(config, redisUser))} ${SENTINEL_CLIENT_ACL}`,
  );
}

/** Every setting that is a secret (never in STACK_DIR/env). @param {Array<{ name: string, secret?: boolean }>} settings */
export function secretNames(settings) {
  return [
    ...new Set([
      ...settings.filter((setting) => setting.secret).map((setting) => setting.name),
      'HAPROXY_STATS_PASSWORD',
      'REDIS_PASSWORD',
      ...Object.values(PROGRAM_SECRETS).flatMap((program) => program.settings),
    ]),
  ];
}

/** The AWS SDK's own credentials, when the operator's environment has them: the origin's alone. */
const AWS_CREDENTIALS = ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN'];

/** `NAME='value'` lines a shell reads back as they were. @param {Array<[string, unknown]>} entries */
export function shellLines(entries) {
  const quote = (/** @type {string} */ value) => `'${value.replace(/'/g, "'\\''")}'`;
  return `${entries.map(([name, value]) => `${name}=${quote(Array.isArray(value) ? value.join(',') : String(value ?? ''))}`).join('\n')}\n`;
}

/** A file its owner alone reads. @param {string} file @param {string} text @param {{ uid: number, gid: number }} [owner] */
function write(file, text, owner) {
  fs.writeFileSync(file, text, { mode: 0o600 });
  fs.chmodSync(file, 0o600);
  if (owner) fs.chownSync(file, owner.uid, owner.gid);
}

/**
 * STACK_DIR/secrets/<program>.env for each program that holds secrets, its user's alone; all.env, root's,
 * with every secret; the exporter's password map. Returns the path of each program's file.
 * @param {Record<string, any>} config the resolved settings @param {string[]} names every secret's name
 * @param {Record<string, { uid: number, gid: number }> | null} users the stack's users by role
 * @param {string} confDir @param {string} exporterAddress the Redis address the exporter scrapes
 * @param {Record<string, string[]>} [serviceSettings] the settings each service declares: written into its file
 *   too, so a service restarted by `reload` reads the new values (supervisord's environment keeps those of `up`)
 */
export function writeSecrets(config, names, users, confDir, exporterAddress, serviceSettings = {}) {
  const dir = makeDir(path.join(config.STACK_DIR, 'secrets'), 0o711);
  fs.chmodSync(dir, 0o711);
  write(
    path.join(dir, 'all.env'),
    shellLines(
      names.filter((name) => config[name] !== undefined && config[name] !== '').map((name) => [name, config[name]]),
    ),
  );
  const own = ownsRedis(config) && config.REDIS_PASSWORD;
  for (const [program, { settings, redisUser, role }] of Object.entries(PROGRAM_SECRETS)) {
    /** @type {Array<[string, unknown]>} */
    const entries = [
      ...(serviceSettings[program] || [])
        .filter((name) => !names.includes(name) && config[name] !== undefined)
        .map((name) => /** @type {[string, unknown]} */ ([name, config[name]])),
      ...settings
        .filter((name) => config[name] !== undefined && config[name] !== '')
        .map((name) => /** @type {[string, unknown]} */ ([name, config[name]])),
    ];
    if (program === 'origin')
      for (const name of AWS_CREDENTIALS) if (process.env[name]) entries.push([name, process.env[name]]);
    if (own) entries.push(['REDIS_USERNAME', redisUser], ['REDIS_PASSWORD', aclPassword(config, redisUser)]);
    else entries.push(['REDIS_USERNAME', config.REDIS_USERNAME || ''], ['REDIS_PASSWORD', config.REDIS_PASSWORD || '']);
    write(path.join(dir, `${program}.env`), shellLines(entries), users?.[role]);
  }
  // versitygw's root credentials, under the names it reads
  if (config.S3_EMBEDDED)
    write(
      path.join(dir, 'versitygw.env'),
      shellLines([
        ['ROOT_ACCESS_KEY_ID', config.S3_ACCESS_KEY_ID],
        ['ROOT_SECRET_ACCESS_KEY', config.S3_SECRET_ACCESS_KEY],
      ]),
      users?.s3,
    );
  // redis_exporter sends a password only to the target it is mapped to: its /scrape?target= endpoint, which
  // any local user can call, cannot hand it to another server
  const map = { [exporterAddress]: own ? aclPassword(config, 'exporter') : config.REDIS_PASSWORD || '' };
  write(path.join(confDir, 'redis-exporter-passwords.json'), JSON.stringify(map), users?.metrics);
}
