// supervisord's part of the render: which programs this machine runs, as which user, from where.
import path from 'node:path';
import { appRoot, inApp } from '../app-copy.js';
import { ROLES, stackUsers } from '../users.js';
import { hostName } from './nginx.js';

/**
 * supervisord.conf's values. @param {Record<string, any>} config
 * @param {{ DATA_ROOT: string, LOG_DIR: string, RUN_DIR: string, CONF_DIR: string }} dirs
 * @returns {Record<string, string>}
 */
export function supervisorValues(config, dirs) {
  const users = stackUsers(config);
  const app = appRoot(users);
  const userLine = (/** @type {typeof ROLES[number]} */ role) =>
    users ? `user=${users[role].name}` : '; the user that started the stack';
  const withSecrets = path.join(app, 'infra', 'with-secrets');
  const nginx = `nginx -p ${dirs.RUN_DIR}/nginx -c ${dirs.CONF_DIR}/nginx.conf -e ${dirs.LOG_DIR}/nginx-error.log`;
  const haproxy = `haproxy -W -db -f ${dirs.CONF_DIR}/haproxy.cfg`;
  return {
    NGINX_COMMAND: followed(app, nginx, `${nginx} -s reload`, config.EDGE_VARNISH_NODES),
    // varnish resolves its backend (haproxy) when it loads its VCL: by name, loaded again when the name moves
    VARNISH_FOLLOWER: follower(
      app,
      `${path.join(app, 'infra', 'docker', 'varnish-reload.sh')} ${dirs.RUN_DIR}/varnish ${dirs.CONF_DIR}/varnish/default.vcl`,
      [config.HAPROXY_HOST],
    ),
    // haproxy follows its servers' names through DNS itself (its resolvers), not a name only /etc/hosts
    // knows: reloaded by the follower (master-worker: SIGUSR2 to the master) when one moves
    HAPROXY_COMMAND: followed(app, haproxy, 'kill -USR2 $FOLLOWED', [
      ...config.ORIGIN_SERVERS,
      ...config.AVATAR_SERVERS,
    ]),
    APP_ROOT: app,
    APP_NODE_BIN: inApp(app, path.dirname(process.execPath)),
    SUPERVISOR_USER_LINE: process.getuid?.() === 0 ? 'user=root' : '; started by a user: every program runs as it',
    ...Object.fromEntries(ROLES.map((role) => [`USER_${role.toUpperCase()}`, userLine(role)])),
    S3_PROGRAM: s3Program(
      config,
      { ...dirs, binary: inApp(app, process.env.VERSITYGW || 'versitygw'), withSecrets },
      userLine('s3'),
    ),
    WITH_SECRETS: withSecrets,
    SECRETS_DIR: path.join(config.STACK_DIR, 'secrets'),
    HOLD_ORIGIN_SOCKET: holdSocket(app, config.ORIGIN_SOCKET),
    HOLD_RESOLVER_SOCKET: holdSocket(app, config.AVATAR_RESOLVER_SOCKET),
  };
}

/**
 * A program's command: with next hops given by name, started by the follower of their addresses
 * (infra/docker/follow-address.sh, as compose and the chart do), which runs `reload` when one changes (nginx,
 * varnish and haproxy resolve a name as the system does only when they load their config: nginx's varnish
 * nodes, varnish's haproxy, haproxy's origins and resolvers kept in /etc/hosts); otherwise the program alone.
 * @param {string} app @param {string} program @param {string} reload @param {string[]} nodes
 */
function followed(app, program, reload, nodes) {
  return follower(app, reload, nodes) + program;
}

/**
 * The start of a program's command that has the follower of its next hops' addresses start it (`followed`),
 * or nothing where none is by name. @param {string} app @param {string} reload @param {string[]} nodes
 */
function follower(app, reload, nodes) {
  const names = nodes.filter((node) => hostName(node));
  if (!names.length) return '';
  return `${path.join(app, 'infra', 'docker', 'follow-address.sh')} 2 "${reload}" ${names.join(',')} -- `;
}

/**
 * The start of a service's command that holds its Unix socket across its restarts (lib/src/hold-socket.js), or
 * nothing where it listens on TCP. @param {string} app @param {string} socket
 */
function holdSocket(app, socket) {
  return socket ? `${path.join(app, 'lib', 'bin', 'hold-socket')} "${socket}" ` : '';
}

/**
 * supervisord.conf with only the programs this machine runs (each `[program:…]` section ends at the next).
 * @param {string} text @param {string[]} programs
 */
export function keepPrograms(text, programs) {
  return text
    .split(/\n(?=\[program:)/)
    .filter((section) => {
      const name = /^\[program:([^\]]+)\]/.exec(section)?.[1];
      return !name || programs.includes(name);
    })
    .join('\n');
}

/**
 * The supervisord program of the embedded versitygw (STORE=s3 without S3_ENDPOINT), or nothing. Its root
 * credentials come from its own secrets file (infra/with-secrets), never from the rendered file.
 * @param {Record<string, any>} config @param {{ DATA_ROOT: string, LOG_DIR: string, binary: string, withSecrets: string }} dirs @param {string} user its user= line
 */
function s3Program(config, { DATA_ROOT, LOG_DIR, binary, withSecrets }, user) {
  if (!config.S3_EMBEDDED) return '; no embedded S3 server (STORE=fs, or S3_ENDPOINT names one)';
  return `[program:versitygw]
; the uploads' bucket (STORE=s3): a directory per bucket under data/s3, objects are files
${user}
command=${withSecrets} "${config.STACK_DIR}/secrets/versitygw.env" ${binary} --port ${config.LISTEN_ADDRESS}:${config.S3_PORT} --iam-dir ${DATA_ROOT}/s3-iam posix ${DATA_ROOT}/s3
priority=15
autorestart=true
startsecs=1
stdout_logfile=${LOG_DIR}/versitygw.log
redirect_stderr=true`;
}
