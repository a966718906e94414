// Who runs what: started as root, every program runs as its own user (STACK_USER_PREFIX + its role), from
// a copy of the checkout those users can read when the checkout is private (app-copy.js); each owns its
// directories.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { PROMETHEUS_SECRET_FILES } from './render/prometheus.js';
import { socketPaths } from './resolve.js';

/** Every program's role: each runs as its own user, STACK_USER_PREFIX + role. */
export const ROLES = ['edge', 'haproxy', 'redis', 'origin', 'resolver', 'purge', 'metrics', 's3'];

/**
 * The users the stack's programs run as, by role: when rendering as root with a STACK_USER_PREFIX and the
 * users exist (up creates them), else null (every program runs as whoever starts the stack).
 * @param {Record<string, any>} config @returns {Record<string, { name: string, uid: number, gid: number }> | null}
 */
export function stackUsers(config) {
  if (process.getuid?.() !== 0 || !config.STACK_USER_PREFIX) return null;
  const passwd = entriesOf('/etc/passwd');
  /** @type {Record<string, { name: string, uid: number, gid: number }>} */
  const users = {};
  for (const role of ROLES) {
    const entry = passwd.find((fields) => fields[0] === `${config.STACK_USER_PREFIX}${role}`);
    if (!entry) return null;
    users[role] = { name: entry[0], uid: Number(entry[2]), gid: Number(entry[3]) };
  }
  return users;
}

/**
 * The directories the programs write, each with the role whose user owns it.
 * @param {Record<string, any>} config @param {Record<string, string>} values
 * @returns {Array<[string, typeof ROLES[number]]>}
 */
export function programDirs(config, values) {
  /** @type {Array<[string, typeof ROLES[number]]>} */
  const dirs = [
    [path.join(values.RUN_DIR, 'varnish'), 'edge'],
    [path.join(values.RUN_DIR, 'nginx'), 'edge'],
    [path.join(values.RUN_DIR, 'edge'), 'edge'],
    [path.join(values.RUN_DIR, 'purge'), 'edge'],
    [path.join(values.RUN_DIR, 'haproxy'), 'haproxy'],
    [path.join(values.DATA_ROOT, 'redis'), 'redis'],
    [path.join(values.DATA_ROOT, 'redis-sentinel'), 'redis'],
    [path.join(values.DATA_ROOT, 'prometheus'), 'metrics'],
    [config.DATA_DIR, 'origin'],
    ...socketDirs(config).map(([dir, role]) => /** @type {[string, typeof ROLES[number]]} */ ([dir, role])),
  ];
  // the embedded versitygw's bucket is a directory
  if (config.S3_EMBEDDED)
    dirs.push(
      [path.join(values.DATA_ROOT, 's3'), 's3'],
      [path.join(values.DATA_ROOT, 's3', config.S3_BUCKET), 's3'],
      [path.join(values.DATA_ROOT, 's3-iam'), 's3'],
    );
  return dirs;
}

/**
 * The group that may read the rendered settings (STACK_DIR/env), where one exists (`<prefix>settings`: the
 * container images make it, compose puts every container in it; the native stack's programs take their
 * settings from supervisord, so there is none and the file stays root's). @param {Record<string, any>} config
 */
export function settingsGroup(config) {
  if (!stackUsers(config)) return null;
  const entry = entriesOf('/etc/group').find((fields) => fields[0] === `${config.STACK_USER_PREFIX}settings`);
  return entry ? Number(entry[2]) : null;
}

/** The colon-separated fields of each line of /etc/passwd or /etc/group (none when it is missing). @param {string} file */
function entriesOf(file) {
  if (!fs.existsSync(file)) return [];
  return fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .map((line) => line.split(':'));
}

/**
 * The directories of the internal sockets (INTERNAL_SOCKETS, resolve.js socketPaths): each its listener's,
 * entered only by the group of the one program that connects (haproxy's frontends: the edge, nginx and
 * varnish; the origin's and the resolver's: haproxy). [directory, owner's role, connecting role]
 * @param {Record<string, any>} config @returns {Array<[string, typeof ROLES[number], typeof ROLES[number]]>}
 */
export function socketDirs(config) {
  const sockets = socketPaths(config.STACK_DIR);
  return [
    [path.dirname(sockets.images), 'haproxy', 'edge'],
    [path.dirname(sockets.origin), 'origin', 'haproxy'],
    [path.dirname(sockets.resolver), 'resolver', 'haproxy'],
  ];
}

/**
 * Each program's directories are its own user's (recursively the first time, then only the top: a large
 * data directory is not walked at every start); the config holding a secret is its reader's alone. logs/
 * stays root's (supervisord writes every program's log) but the edge may add files and rename its own
 * there (group-writable, sticky): nginx writes its logs itself and rotate-logs renames them.
 * @param {Record<string, any>} config @param {Record<string, string>} values
 */
export function giveToStackUsers(config, values) {
  const users = stackUsers(config);
  if (!users) {
    // every program runs as this user: its sockets are its alone
    for (const [dir] of socketDirs(config)) fs.chmodSync(dir, 0o700);
    return;
  }
  for (const [dir, role] of programDirs(config, values)) {
    const { uid, gid } = users[role];
    if (fs.statSync(dir).uid !== uid) execFileSync('chown', ['-R', `${uid}:${gid}`, dir]);
    // the purge socket's directory: reachable by the purge service (varnish checks who connects)
    fs.chmodSync(dir, dir === path.join(values.RUN_DIR, 'purge') ? 0o755 : 0o750);
  }
  for (const [dir, role, connecting] of socketDirs(config)) fs.chownSync(dir, users[role].uid, users[connecting].gid);
  // readable by root and the edge (mtail reads nginx's access log) only: the logs hold client addresses
  fs.chownSync(values.LOG_DIR, 0, users.edge.gid);
  fs.chmodSync(values.LOG_DIR, 0o1770);
  for (const name of fs.readdirSync(values.LOG_DIR).filter((file) => /^nginx-(access|error)\.log/.test(file))) {
    fs.chownSync(path.join(values.LOG_DIR, name), users.edge.uid, users.edge.gid);
  }
  fs.chownSync(path.join(values.CONF_DIR, 'haproxy.cfg'), users.haproxy.uid, users.haproxy.gid);
  fs.chownSync(path.join(values.CONF_DIR, 'redis.conf'), users.redis.uid, users.redis.gid);
  for (const name of PROMETHEUS_SECRET_FILES)
    fs.chownSync(path.join(values.CONF_DIR, 'prometheus', name), users.metrics.uid, users.metrics.gid);
  if (fs.existsSync(path.join(values.CONF_DIR, 'tls', 'key.pem')))
    fs.chownSync(path.join(values.CONF_DIR, 'tls', 'key.pem'), users.edge.uid, users.edge.gid);
}
