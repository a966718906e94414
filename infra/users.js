// Who runs what: started as root, every program runs as its own user (STACK_USER_PREFIX + its role), from
// a copy of the checkout those users can read when the checkout is private; each owns its directories.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { makeDir } from './dirs.js';
import { PROMETHEUS_SECRET_FILES } from './render/prometheus.js';
import { ROOT, reachableByOthers, sharedDirOf, socketPaths } from './resolve.js';

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

/** What the app copy leaves out: not the app, or tools' caches the tests write while stacks run from it. */
const NOT_COPIED = ['.git', '.run', 'bench/.peers', 'bench/reports', 'node_modules/.cache'];

/**
 * Whether a file of the checkout is newer than `stamp` (or there is no stamp). @param {string} stamp
 */
function newerThan(stamp) {
  if (!fs.existsSync(stamp)) return true;
  const prunes = NOT_COPIED.flatMap((dir) => ['-path', path.join(ROOT, dir), '-prune', '-o']);
  try {
    const found = execFileSync('find', [ROOT, ...prunes, '-newer', stamp, '-print', '-quit'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    return found.trim() !== '';
  } catch {
    // the stamp gone while find read it: another render is putting a new copy in place; look again under the lock
    return true;
  }
}

/**
 * Where the programs run from: this checkout, or when the stack user cannot read it (a root-run clone in
 * /root, a mktemp -d) a copy of it in /var/lib/image-cdn-stack, made again whenever a file of the checkout
 * is newer than the copy. One process at a time makes it (a lock on `app.lock` beside it), and looks again
 * once it holds the lock: the stacks of one checkout rendered together (a test tier's, `up`'s beside it)
 * make it once, and none removes the copy another has just made. @param {Record<string, unknown> | null} users
 */
export function appRoot(users) {
  if (!users || reachableByOthers(ROOT)) return ROOT;
  const target = path.join(sharedDirOf(ROOT), 'app');
  const stamp = path.join(target, '.copied');
  if (!newerThan(stamp)) return target;
  makeDir(path.dirname(target), 0o755);
  const lock = fs.openSync(`${target}.lock`, 'a', 0o600);
  try {
    // flock(1) locks the open file this process holds (fd 3 of its child): held until it is closed
    execFileSync('flock', ['--exclusive', '3'], { stdio: ['ignore', 'ignore', 'inherit', lock] });
    if (newerThan(stamp)) copyApp(target);
  } finally {
    fs.closeSync(lock);
  }
  return target;
}

/** The checkout copied to `target`, readable by all, stamped, in place of the copy before. @param {string} target */
function copyApp(target) {
  const fresh = `${target}.${process.pid}`;
  fs.rmSync(fresh, { recursive: true, force: true });
  makeDir(fresh, 0o755);
  const excludes = NOT_COPIED.map((dir) => `--exclude=./${dir}`).join(' ');
  execFileSync('sh', [
    '-c',
    `tar -C "$1" ${excludes} -cf - . | tar -C "$2" -xf - && chmod -R a+rX "$2"`,
    'copy',
    ROOT,
    fresh,
  ]);
  fs.writeFileSync(path.join(fresh, '.copied'), '');
  // the copy before moved aside, not removed in place: the target is missing between two renames only
  const old = `${target}.old.${process.pid}`;
  fs.rmSync(old, { recursive: true, force: true });
  if (fs.existsSync(target)) fs.renameSync(target, old);
  fs.renameSync(fresh, target);
  fs.rmSync(old, { recursive: true, force: true });
}

/** A path of the checkout as the programs see it: in the app copy when there is one. @param {string} app @param {string} file */
export function inApp(app, file) {
  return file.startsWith(`${ROOT}/`) ? path.join(app, path.relative(ROOT, file)) : file;
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
